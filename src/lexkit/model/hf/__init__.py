"""Hugging Face causal LMs behind lexkit's patterns and kernels (optional extra ``hf``): the
transformers adapter, and nothing else (the instruments take the model as they take a run's).

``load(path)`` returns an :class:`HFModel`: a transformers causal LM (a local ``save_pretrained``
directory, or a hub name already in the local cache; nothing is downloaded) whose attention runs
through lexkit, called like lexkit's own :class:`~lexkit.model.gpt.GPT`; ``lexkit.load("hf:PATH")``
(:mod:`lexkit.instruments.subject`) wraps it for the instruments. One module per job:

* :mod:`~lexkit.model.hf.model_types`: the model types lexkit runs and what each of their layers is (its
  layer type, RoPE or not, its own mask as a lexkit pattern, sinks, soft-capping, temperature);
* :mod:`~lexkit.model.hf.interface`: the attention and mask functions registered with transformers;
* :mod:`~lexkit.model.hf.model`: :class:`HFModel`, the wrapper (patterns per layer, text as tokens);
* :mod:`~lexkit.model.hf.loading`: :func:`load` and ``--rope-scaling``.

Families verified by the tests (tiny random models against transformers' eager attention):
Llama, Mistral, Qwen2 and Qwen3 (RoPE, GQA, sliding windows by layer), GPT-NeoX (partial rotary),
GPT-2 (learned absolute positions), Bloom (ALiBi), Gemma 2 (sliding every other layer, logit
soft-capping), Gemma 3 (five local layers per global one, a RoPE base per layer type), GPT-OSS
(banded window and full layers, a sink logit per head), Llama 4 (chunked RoPE layers, global NoPE
layers with a query temperature), Cohere 2 (window RoPE layers, full NoPE layers) and SmolLM3
(``no_rope_layers``). docs/pretrained.md has the table.
"""

from .interface import ATTN, EXTRA, attention, mask, own_mask, register, require
from .loading import load, parse_rope_scaling, parse_rope_scalings
from .model import HFConfig, HFModel
from .model_types import MODEL_TYPES, ModelType, layers_of

__all__ = [
    "ATTN", "EXTRA", "MODEL_TYPES", "ModelType", "HFConfig", "HFModel", "attention", "layers_of", "load",
    "mask", "own_mask", "parse_rope_scaling", "parse_rope_scalings", "register", "require",
]
