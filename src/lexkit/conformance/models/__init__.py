"""Conformance of whole models (``lexkit conformance --models``, docs/conformance.md): tiny random
checkpoints of the families whose long-context bugs live in whole models (:mod:`.cases`), each runtime's
logits at every position, prefill and decode through its own cache (:mod:`.harness`), against lexkit's
float64 forward of the same weights (:mod:`.forward`): each layer's RoPE the conformance reference's, its
mask a lexkit pattern. Runtimes in process (:mod:`.runtime`: transformers, lexkit's own decoder and its
planted bugs) and in their own environments (:mod:`.remote`: mlx-lm)."""

from . import remote  # noqa: F401  (registers the out-of-process runtimes)
from .cases import CASES, ModelCase, cases
from .checkpoint import checkpoint
from .harness import Check, ModelResult, check, run
from .llamacpp import LlamaCppModels  # noqa: F401  (registers llama.cpp's runtime)
from .runtime import BUGS, MODEL_RUNTIMES, ModelRuntime, register, toy
from .vllm import VllmModels  # noqa: F401  (registers vLLM's runtime)

__all__ = ["BUGS", "CASES", "MODEL_RUNTIMES", "Check", "ModelCase", "ModelResult", "ModelRuntime", "cases",
           "check", "checkpoint", "register", "run", "toy"]
