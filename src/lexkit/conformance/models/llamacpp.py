"""llama.cpp's whole models, through llama-cpp-python in an environment of its own (the side:
``sides/llamacpp_side.py``): each checkpoint converted by llama.cpp's own ``convert_hf_to_gguf.py
--outtype f32`` (from the sdist of the same version) and run by ``llama_cpp.Llama`` with a float32 KV
cache and flash attention off, prefill and decode through ``eval`` and ``scores``; a batch through
llama.cpp's own batch API (``llama_batch_init``, each sequence its ``seq_id``, one ``llama_decode`` in a
unified KV cache of sequences x 32·L)."""

from __future__ import annotations

from .remote import RemoteModelRuntime
from .runtime import register


@register
class LlamaCppModels(RemoteModelRuntime):
    name = "llama.cpp"
    side = "llamacpp_side"
    probe = "llama_cpp"
    install = ('python -m venv ENV && CMAKE_ARGS="-DGGML_NATIVE=OFF" ENV/bin/pip install --no-binary '
               "llama-cpp-python llama-cpp-python && ENV/bin/pip download --no-deps --no-binary :all: "
               "llama-cpp-python==VERSION -d ENV/sdist && mkdir -p ENV/src && tar xzf "
               "ENV/sdist/llama_cpp_python-VERSION.tar.gz -C ENV/src && ENV/bin/pip install torch (a CPU build: "
               "PyTorch's CPU wheel index) && ENV/bin/pip install transformers sentencepiece "
               "-e ENV/src/llama_cpp_python-VERSION/vendor/llama.cpp/gguf-py (the converter is then found under "
               "ENV/src; else set LEXKIT_LLAMACPP_CONVERTER to its convert_hf_to_gguf.py)")
    summary = ("convert_hf_to_gguf.py --outtype f32 (a sentencepiece tokenizer.model of the vocabulary written "
               "beside a copy), llama_cpp.Llama with an f32 KV cache, flash attention off, logits_all: eval and "
               "scores for prefill and decode, a batch as one llama_decode of both sequences (llama_batch_init, "
               "a seq_id each, a unified KV cache); out of process")
