"""Inference-time attention patterns: each is one mask predicate over query/key indices, in a room of
its own or of its family, registered by name (:data:`PATTERNS`) and built from a spec (:func:`create`).

>>> from lexkit import attention
>>> attention.create("first:4|window:64").spec
'first:4|window:64'

* :mod:`.base`: the interface (:class:`Pattern`: ``visible``, ``reach``, ``sinks``, ``retained``) and
  the registry;
* :mod:`.full`: ``causal``, full causal attention, n <= m;
* :mod:`.window`: ``window:W``, causal and 0 <= m - n < W (the super-strong baseline);
* :mod:`.blocks`: ``bca:W`` (blockwise causal, Sun et al. 2022) and ``chunk:W`` (Llama 4's chunks);
* :mod:`.sinks`: ``first:K`` (the first K keys) and ``sinks:W,K=4`` (StreamingLLM: ``first:K|window:W``);
* :mod:`.algebra`: :class:`Either` (``a|b``), :class:`Both` (``a&b``) and :func:`intersect`;
* :mod:`.layered`: :class:`Layered`, one pattern per layer;
* :mod:`.grammar`: :func:`create` (a spec: ``&`` binds tighter than ``|``, parentheses group) and
  :func:`pattern_help`, every ``--pattern`` flag's help, made from the registry.

A user's own pattern is one class with ``@lexkit.attention.register`` (tests/fixtures/my_pattern.py).
"""

# each import registers its patterns, in this order (the registry lists them so)
# isort: off
from . import full  # noqa: F401
from . import window  # noqa: F401
from . import blocks  # noqa: F401
from . import sinks  # noqa: F401
# isort: on
from .algebra import Both, Either, intersect
from .base import PATTERNS, Pattern, causal, describe, names, near, register
from .blocks import BCA, Chunk
from .full import Causal
from .grammar import create, pattern_help, written
from .layered import Layered, layer_patterns
from .sinks import First, Sinks
from .window import Window

__all__ = ["BCA", "PATTERNS", "Both", "Causal", "Chunk", "Either", "First", "Layered", "Pattern", "Sinks", "Window",
           "causal", "create", "describe", "intersect", "layer_patterns", "names", "near", "pattern_help",
           "register", "written"]
