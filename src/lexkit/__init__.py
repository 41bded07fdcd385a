"""lexkit: length extrapolation of Transformers, measured.

Position schemes (`lexkit.positions`), inference-time attention patterns and kernels
(`lexkit.attention`), a byte-level decoder (`lexkit.model`), training and evaluation at many
lengths, and the attention-resolution instrument. The library in four calls::

    subject = lexkit.load("runs/x")              # or "hf:PATH": a Hugging Face causal LM
    report = lexkit.evaluate(subject.model, docs, [256, 1024], ["causal", "window"])
    doc = lexkit.resolution(subject, [256, 1024])   # empirical R per layer (analytic: a scheme spec)
    lexkit.train("runs/y", *lexkit.configs("tiny", "rope"))
"""

__version__ = "0.1.0"

from . import attention, positions  # noqa: E402
from .model import BOS, GPT, VOCAB, ModelConfig  # noqa: E402

__all__ = ["BOS", "GPT", "VOCAB", "ModelConfig", "attention", "positions", "__version__"]


from .subject import load  # noqa: E402

__all__ += ["load"]
