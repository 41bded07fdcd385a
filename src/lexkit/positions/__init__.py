"""Position schemes: a registry of named schemes built from spec strings.

>>> from lexkit import positions
>>> scheme = positions.create("xpos:gamma=0.4", n_heads=4, head_dim=32)
>>> scheme.family
'rotary'
"""

# each import registers its schemes, in this order (the registry lists them so)
# isort: off
from . import absolute  # noqa: F401
from . import rotary  # noqa: F401
from . import bias  # noqa: F401
from . import rerope  # noqa: F401  (context extension, after the ten schemes of the two source documents)
from . import fire  # noqa: F401  (the schemes since the seeds: FIRE, PoPE, CoPE, forgetting gates)
from . import pope  # noqa: F401
from . import cope  # noqa: F401
from . import fox  # noqa: F401
# isort: on
from .base import Scheme, build, canonical, create, describe, full, get, names, parse, pin, register

#: the schemes since the two source documents (docs/schemes.md): ``lexkit study --since-seeds``
SINCE_SEEDS = ["fire", "pope", "cope", "fox"]

__all__ = ["Scheme", "build", "canonical", "create", "describe", "full", "get", "names", "parse", "pin", "register"]
