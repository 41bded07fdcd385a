"""vLLM's whole models (``lexkit conformance --models --impl vllm``), in its own environment
(``--python vllm=PATH``): the side (``sides/vllm_side.py``: ``model_supports``, ``load_model``) serves each
checkpoint through ``LLM(...)`` and ``SamplingParams`` as a user does, one engine per model."""

from __future__ import annotations

from ..adapters.vllm import Vllm
from .remote import RemoteModelRuntime
from .runtime import register


@register
class VllmModels(RemoteModelRuntime):
    name = "vllm"
    side = "vllm_side"
    probe = "vllm"
    install = Vllm.install
    summary = ("LLM(dir, dtype=float32, max_model_len=P+1, logprobs_mode=raw_logits, max_logprobs=-1, prefix "
               "caching, block 32), its compiled CPU model; prefill: prompt_logprobs=-1 shifted a position, "
               "the last from the generated token; decode/1: one request generating the ids (forced by a "
               "logits processor) through vLLM's decode loop; decode/k: requests extending the prompt k at a "
               "time over the prefix cache (full blocks of 32 only: a prefix under 32 tokens is recomputed, a "
               "prefill); CPU_ATTN runs head sizes 32 and up; out of process")
