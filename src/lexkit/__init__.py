"""lexkit: length extrapolation of Transformers, measured.

Position schemes (`lexkit.positions`), inference-time attention patterns and kernels
(`lexkit.attention`), a byte-level decoder (`lexkit.model`), training and evaluation at many
lengths, and the attention-resolution instrument. The library in four calls::

    lexkit.train("runs/y", *lexkit.train.configs("tiny", "rope"), corpus=corpus)
    subject = lexkit.load("runs/y")              # or "hf:PATH": a Hugging Face causal LM
    report = lexkit.evaluate(subject.model, docs, [256, 1024], ["causal", "window"])
    doc = lexkit.resolution(subject, [256, 1024])   # empirical R per layer (a scheme spec: analytic)
"""

__version__ = "0.1.0"

from . import attention, positions  # noqa: E402
from .model import BOS, GPT, VOCAB, ModelConfig  # noqa: E402

__all__ = ["BOS", "GPT", "VOCAB", "ModelConfig", "attention", "positions", "__version__"]


from .subject import load  # noqa: E402


def __getattr__(name: str):
    """``lexkit.evaluate``, ``lexkit.train``, ``lexkit.resolution``: modules that are also their
    main function (:mod:`lexkit.api`), imported on first use so ``import lexkit`` stays light."""
    if name in ("evaluate", "train", "resolution"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'lexkit' has no attribute {name!r}")


__all__ += ["evaluate", "load", "resolution", "train"]
