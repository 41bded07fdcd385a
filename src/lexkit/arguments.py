"""A command's spec arguments checked against the registries before any model loads, so a typo costs
no loading time: attention patterns (their syntax and parameter values; a window left to the model's
training length is resolved when the model is known) and position schemes."""

from __future__ import annotations

from collections.abc import Iterable

from . import positions
from .attention import create as create_pattern

#: the window a pattern spec is checked with when it leaves W to the model (any valid W would do)
STAND_IN_WINDOW = 2


def patterns(specs: str | Iterable[str]) -> None:
    """ValueError naming the first pattern spec that is not a valid pattern."""
    for spec in [specs] if isinstance(specs, str) else specs:
        create_pattern(spec, default_window=STAND_IN_WINDOW)


def scheme(spec: str | None) -> None:
    """ValueError when ``spec`` (None: not given) is not a valid position scheme."""
    if spec is not None:
        positions.canonical(spec)
