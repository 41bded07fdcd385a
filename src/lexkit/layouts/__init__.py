"""Layouts: a position scheme, an attention pattern, a temperature and a sink per layer.

Since the seeds, the designs that aim to be flat *and* use a long context give layers different jobs
(docs/layouts.md): local layers (RoPE inside a window or chunk, never out of distribution) under
global layers (full attention, usually no position encoding, a length-dependent temperature). A
layout says what every layer is, as one spec a person can type (``lexkit train --layout``)::

    layout   := NAME[:PARAMS]                      a named design: hwfa, hwfa2, rnope-swa, irope, gemma, gpt-oss
              | group (';' group)*
    group    := layer ['x' N] | '(' layout ')' 'x' N
    layer    := [SCHEME] ['@' PATTERN] ('+' MODIFIER)*
    MODIFIER := TEMPERATURE | 'sink'                TEMPERATURE: logn, llama4[:beta=B,floor=F], ssmax

e.g. ``rope@window:16 ; none@causal+logn`` (HWFA on two layers) or ``(rope@window:64)x3 ; none``.
A layer's SCHEME defaults to the model's ``--scheme``, its PATTERN to ``causal``; a pattern's W
defaults to the training length. A layout of k layers on a model of n layers repeats n/k times
when k divides n; any other length is an error naming both.

A layer is **local** when its pattern has a finite reach (window, bca, chunk, sinks) and **global**
otherwise; the two words select layers at evaluation, beside ``L3`` and ``L0-2`` (0-based,
inclusive). The pattern a layer trains under is part of the model. At evaluation:

* an unqualified pattern (``--pattern window:64``) applies to every layer *inside* its own (the keys
  visible under both, :func:`lexkit.attention.intersect`): ``causal`` is the run's own layout, and a
  uniform model (every layer causal) reads exactly as before;
* ``SELECTOR=PATTERN`` replaces the pattern of the layers it selects (``--pattern global=window:64``,
  ``--pattern local=causal`` widens the local layers); several join with ``;``
  (``local=causal;global=window:256``).

Rules checked once, here, naming the layer: every scheme, pattern and temperature exists and takes its
parameters; an absolute scheme (it adds positions to the embeddings) is all layers' or none's; a
temperature grows with the position, so it belongs to a global layer (a local layer's count of
visible keys stops at its reach).
"""

from __future__ import annotations

import re

from .. import positions
from ..specs import split_spec
from .layer import (
    KINDS,
    SINK,
    Layer,
    LayoutError,
    canonical,
    check,
    is_uniform,
    parse_layer,
    parse_written,
    resolved,
    uniform,
)
from .named import NAMED, NamedLayout, describe, hwfa_window, register
from .select import check_pattern, check_scheme, override_schemes, resolve_pattern, select, split_overrides

__all__ = [
    "KINDS", "NAMED", "SINK", "Layer", "LayoutError", "NamedLayout", "canonical", "check", "check_pattern",
    "check_scheme", "describe", "hwfa_window", "is_uniform", "override_schemes", "parse", "parse_layer",
    "parse_written", "register", "resolve_pattern", "resolved", "select", "split_overrides", "uniform",
]


def parse(text: str, *, n_layers: int, train_len: int, scheme: str = "rope", max_len: int | None = None) -> list[Layer]:
    """A layout spec (named or written out) -> one :class:`Layer` per layer of an ``n_layers``
    model trained at ``train_len`` (``max_len``: a learned table's size, default ``train_len``).
    :class:`LayoutError` (a ValueError) names the layer at fault."""
    if not isinstance(text, str) or not text.strip():
        raise LayoutError(f"empty layout {text!r}")
    text = text.strip()
    name = split_spec(text)[0] if not re.search(r"[@;()+]", text) else None
    if name is not None and name in NAMED:
        return NAMED.get(name).build(text, n_layers=n_layers, train_len=train_len, max_len=max_len)
    if name is not None and name not in positions.names():
        raise LayoutError(f"unknown layout {name!r}: not a named layout ({', '.join(NAMED.names())}) nor a scheme "
                          f"({', '.join(positions.names())}); a written-out layout is SCHEME@PATTERN;...")
    return parse_written(text, n_layers=n_layers, train_len=train_len, scheme=scheme, max_len=max_len)
