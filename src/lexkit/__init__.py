"""lexkit: length extrapolation of Transformers, measured.

Position schemes (`lexkit.positions`), inference-time attention patterns and kernels
(`lexkit.attention`), a byte-level decoder (`lexkit.model`), training and evaluation at many
lengths, and the attention-resolution instrument.
"""

__version__ = "0.1.0"

from . import attention, positions  # noqa: E402
from .model import BOS, GPT, VOCAB, ModelConfig  # noqa: E402

__all__ = ["BOS", "GPT", "VOCAB", "ModelConfig", "attention", "positions", "__version__"]

from .runs import load  # noqa: E402

__all__ += ["load"]
