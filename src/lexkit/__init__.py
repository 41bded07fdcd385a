"""lexkit: length extrapolation of Transformers, measured.

Position schemes (`lexkit.positions`), inference-time attention patterns and kernels
(`lexkit.attention`), a byte-level decoder (`lexkit.model`), training and evaluation at many
lengths, and the attention-resolution instrument. The library in four calls::

    lexkit.train("runs/y", *lexkit.train.configs("tiny", "rope"), corpus=corpus)
    subject = lexkit.load("runs/y")              # or "hf:PATH": a Hugging Face causal LM
    report = lexkit.evaluate(subject.model, docs, [256, 1024], ["causal", "window"])
    doc = lexkit.resolution(subject, [256, 1024])   # empirical R per layer (a scheme spec: analytic)
"""

from . import attention, positions
from .core.version import __version__
from .model.gpt import BOS, GPT, VOCAB, ModelConfig

__all__ = ["BOS", "GPT", "VOCAB", "ModelConfig", "attention", "positions", "__version__", "evaluate", "load",
           "resolution", "train"]


def __getattr__(name: str):
    """Imported on first use, so ``import lexkit`` stays light: ``lexkit.evaluate``,
    ``lexkit.train``, ``lexkit.resolution`` (modules that are also their main function,
    :mod:`lexkit.core.api`) and ``lexkit.load`` (:func:`lexkit.instruments.subject.load`)."""
    import importlib

    if name in ("evaluate", "train", "resolution"):
        return importlib.import_module(f".{name}", __name__)
    if name == "load":
        return importlib.import_module(".instruments.subject", __name__).load
    raise AttributeError(f"module 'lexkit' has no attribute {name!r}")
