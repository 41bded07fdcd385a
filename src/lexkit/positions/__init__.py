"""Position schemes: a registry of named schemes built from spec strings.

>>> from lexkit import positions
>>> scheme = positions.create("xpos:gamma=0.4", n_heads=4, head_dim=32)
>>> scheme.family
'rotary'
"""

from . import absolute  # noqa: F401  (each import registers its schemes, in this order)
from . import rotary  # noqa: F401
from . import bias  # noqa: F401
from . import rerope  # noqa: F401  (context extension, after the seeds' ten)
from .base import Scheme, canonical, create, describe, get, names, parse, register

__all__ = ["Scheme", "canonical", "create", "describe", "get", "names", "parse", "register"]
