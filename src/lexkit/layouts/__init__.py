"""Layouts: a position scheme, an attention pattern and modifiers per layer, as a layer stack.

Since the seeds, the designs that aim to be flat *and* use a long context give layers different jobs
(docs/layouts.md): local layers (RoPE inside a window or chunk, never out of distribution) under
global layers (full attention, usually no position encoding, a length-dependent temperature). A
layout says what every layer is, as one spec a person can type (``lexkit train --layout``)::

    layout   := NAME[:PARAMS]                      a named design: hwfa, hwfa2, rnope-swa, irope, gemma, gpt-oss
              | group (';' group)*
    group    := layer ['x' N] | '(' layout ')' 'x' N    N copies, each its own weights
              | '(' layout ')' '^' N                   a loop: N passes with the same weights
    layer    := [SCHEME] ['@' PATTERN] ('+' MODIFIER)*
    MODIFIER := a registered layer modifier (lexkit.attention.modifiers; `lexkit layouts` lists them):
                logn, llama4[:beta=B,floor=F], ssmax, sink, shift[:F], softcap:C, ...

e.g. ``rope@window:16 ; none@causal+logn`` (HWFA on two layers) or ``(rope@window:64)x3 ; none``;
``(rope@window:16 ; none@causal)^2`` runs the pair twice with one pair's weights (weight-tied depth,
:attr:`LayerStack.weights`).
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

A layout is parsed once into a :class:`LayerStack` (objects: each layer's scheme spec, its
:class:`~lexkit.attention.Pattern`, its :class:`~lexkit.attention.modifiers.Modifier` objects), which
the model config keeps; named layouts build their stacks from objects. Rules checked once, here,
naming the layer: every scheme, pattern and modifier exists and takes its parameters; an absolute
scheme (it adds positions to the embeddings) is all layers' or none's; a modifier that grows with the
position (a temperature) belongs to a global layer (a local layer's count of visible keys stops at
its reach); a layer takes each modifier once and one of a group (one temperature).
"""

from __future__ import annotations

import re

from .. import positions
from ..core.specs import split_spec
from .layer import build_layer, expand, expand_looped, parse_layer, parse_written, uniform
from .named import NAMED, NamedLayout, describe, hwfa_window, register
from .select import SCOPES, check_pattern, check_scheme, chosen_schemes, resolve_pattern, select, split_overrides
from .stack import Layer, LayerStack, LayoutError, canonical, check, scope_of

__all__ = [
    "NAMED", "SCOPES", "Layer", "LayerStack", "LayoutError", "NamedLayout", "build_layer", "canonical", "check",
    "check_pattern", "check_scheme", "chosen_schemes", "describe", "expand", "expand_looped", "hwfa_window",
    "scope_of", "parse", "parse_layer", "parse_written", "register", "resolve_pattern", "select", "split_overrides",
    "uniform",
]


def parse(text: str, *, n_layers: int, train_len: int, scheme: str = "rope", max_len: int | None = None) -> LayerStack:
    """A layout spec (named or written out) -> the :class:`LayerStack` of an ``n_layers`` model
    trained at ``train_len`` (``max_len``: how many positions training reaches, default
    ``train_len``). :class:`LayoutError` (a ValueError) names the layer at fault."""
    if not isinstance(text, str) or not text.strip():
        raise LayoutError(f"empty layout {text!r}")
    text = text.strip()
    name = split_spec(text)[0] if not re.search(r"[@;()+^]", text) else None
    if name is not None and name in NAMED:
        return NAMED.get(name).build(text, n_layers=n_layers, train_len=train_len, max_len=max_len)
    if name is not None and name not in positions.names():
        raise LayoutError(f"unknown layout {name!r}: not a named layout ({', '.join(NAMED.names())}) nor a scheme "
                          f"({', '.join(positions.names())}); a written-out layout is SCHEME@PATTERN;...")
    return parse_written(text, n_layers=n_layers, train_len=train_len, scheme=scheme, max_len=max_len)
