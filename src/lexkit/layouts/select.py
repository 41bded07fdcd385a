"""What an evaluation pattern or scheme means on a model whose layers differ: selectors (``local``,
``global``, ``L3``, ``L0-2``, a model's own layer types), unqualified specs inside each layer's own,
``SELECTOR=SPEC`` replacing the selected layers' (docs/layouts.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .. import positions
from ..attention import Layered, Pattern, intersect
from ..attention import create as create_pattern
from ..core.specs import split_spec

SCOPES = ("local", "global")  # a layer is local (a finite reach) or global
_INDEX = re.compile(r"^L(\d+)(?:-(\d+))?$")


def select(selector: str, layers: Sequence[str | Sequence[str]]) -> list[int]:
    """The layers a selector names, given each layer's scope (``local``/``global``) or, for a Hugging
    Face model, its names (its own layer type and its scope: ``("sliding_attention", "local")``): a
    name, ``L3`` or ``L0-2`` (0-based, inclusive). ValueError naming what this model has."""
    selector = selector.strip()
    names = [(name,) if isinstance(name, str) else tuple(name) for name in layers]  # [layer] its names
    match = _INDEX.match(selector)
    if match:
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) is not None else lo
        if lo > hi:
            raise ValueError(f"layer selector {selector!r} is an empty range: write L<i>-<j> with i <= j "
                             f"(layers L0-{len(names) - 1})")
        if hi >= len(names):
            raise ValueError(f"layer selector {selector!r}: the model has layers L0-{len(names) - 1}")
        return list(range(lo, hi + 1))
    chosen = [i for i, own in enumerate(names) if selector in own]
    if not chosen:
        have = sorted({name for own in names for name in own})
        if selector in SCOPES or selector in have:
            raise ValueError(f"layer selector {selector!r}: this model has no {selector} layer "
                             f"(its layers are {', '.join(have)})")
        raise ValueError(f"unknown layer selector {selector!r}; valid: {', '.join(have)}, L<i> or L<i>-<j> "
                         f"(layers L0-{len(names) - 1})")
    return chosen


_SELECTOR = re.compile(r"^\s*([A-Za-z][\w\-]*)\s*=(.*)$", re.S)


def split_overrides(text: str) -> tuple[str | None, list[tuple[str, str]]]:
    """``"window:64;global=causal"`` -> (``"window:64"``, ``[("global", "causal")]``): the unqualified
    part (at most one) and the ``SELECTOR=SPEC`` parts, in order. A part is qualified when it starts
    with a selector and ``=`` before any ``:`` (``window:W=64`` is a pattern, not a selector)."""
    plain: str | None = None
    pairs: list[tuple[str, str]] = []
    for part in text.split(";"):
        match = _SELECTOR.match(part)
        if match and ":" not in match.group(1):
            if not match.group(2).strip():
                raise ValueError(f"{part.strip()!r}: nothing after '='")
            selector = match.group(1).strip()
            twice = next((p for p in pairs if p[0] == selector), None)
            if twice is not None:
                raise ValueError(f"{text!r} gives layer selector {selector!r} twice ({selector}={twice[1]}, "
                                 f"{part.strip()}); give each selector once")
            pairs.append((selector, match.group(2).strip()))
        elif not part.strip():
            raise ValueError(f"{text!r} has an empty part (two ';' in a row, or one at an end)")
        elif plain is not None:
            raise ValueError(f"{text!r} has two patterns for every layer ({plain!r}, {part.strip()!r}); "
                             "qualify one with SELECTOR= (local, global, L<i>)")
        else:
            plain = part.strip()
    return plain, pairs


def check_scheme(spec: str) -> None:
    """ValueError for an evaluation ``--scheme`` no run could take (each part's scheme and
    parameters), before any model loads; selectors are checked against the run."""
    for text in _specs(spec):
        positions.canonical(text)


def check_pattern(spec: str) -> None:
    """ValueError for an evaluation pattern spec that no model could take (syntax, names, parameter
    values), before any model loads; W may be left to the model. Selectors are checked against the
    model when the spec resolves."""
    for text in _specs(spec):
        create_pattern(text, default_window=2)


def _specs(text: str) -> list[str]:
    """Every spec of an evaluation ``--scheme`` or ``--pattern``: the unqualified one, then each
    ``SELECTOR=SPEC``'s (:func:`split_overrides`)."""
    plain, pairs = split_overrides(text)
    return ([plain] if plain is not None else []) + [spec for _, spec in pairs]


def resolve_pattern(own: Sequence[Pattern], names: Sequence[str | Sequence[str]], spec: str | Pattern, *,
                    default_window: int | None) -> Pattern:
    """What an evaluation pattern means on a model whose layers have patterns ``own`` (module
    docstring): a plain :class:`Pattern` when every layer gets the same one from an unqualified
    spec (a uniform model reads exactly as before), else a :class:`Layered` pattern labelled with
    the canonical spec."""
    if isinstance(spec, Layered):
        return spec
    if isinstance(spec, Pattern):
        plain, pairs = spec, []
    else:
        text, pairs = split_overrides(spec)
        plain = None if text is None else create_pattern(text, default_window=default_window)
    layers = [p if plain is None else intersect(p, plain) for p in own]
    labels = [] if plain is None else [plain.spec]
    chosen_by: dict[int, str] = {}
    for selector, text in pairs:
        pattern = create_pattern(text, default_window=default_window)
        for i in select(selector, names):
            if i in chosen_by:
                raise ValueError(f"layer L{i} is selected by both {chosen_by[i]!r} and {selector!r} in {spec!r}; "
                                 "give each layer one pattern")
            chosen_by[i] = selector
            layers[i] = pattern
        labels.append(f"{selector}={pattern.spec}")
    if not pairs and all(p == layers[0] for p in layers):
        return layers[0]
    return Layered(layers, ";".join(labels) or "causal")


def chosen_schemes(schemes: Sequence[str], names: Sequence[Sequence[str]], spec: str,
                   length: int) -> list[tuple[int, str]]:
    """(layer, new scheme) for what an evaluation ``--scheme`` gives layers with ``schemes`` and
    selector names ``names`` (``rope:scaling=yarn,factor=4``, ``global=rerope:w=64``,
    ``L0-2=rope:base=500000``), pinned at the model's training ``length``. Unqualified, it replaces
    the scheme of every layer on a model with one scheme, and otherwise of the layers whose scheme is
    of its family (RoPE scalings reach the layers with RoPE only); an error when none is, or when it
    would change no layer (``--scheme none`` on layers that are already ``none``). A layer selected
    twice is an error."""
    plain, pairs = split_overrides(spec)
    out: list[tuple[int, str]] = []
    if plain is not None:
        new = positions.pin(plain, length)
        family = positions.get(split_spec(new)[0]).family
        if len(set(schemes)) == 1:
            chosen = list(range(len(schemes)))
        else:
            chosen = [i for i, scheme in enumerate(schemes) if positions.get(split_spec(scheme)[0]).family == family]
            if not chosen:
                have = ", ".join(sorted(set(schemes)))
                raise ValueError(f"--scheme {plain}: no layer of this model has a {family} scheme (it has {have}); "
                                 "name the layers, e.g. --scheme global=SPEC or L0=SPEC")
            if all(schemes[i] == new for i in chosen):
                layers = ", ".join(f"L{i}" for i in chosen)
                raise ValueError(f"--scheme {plain} changes no layer of this model: its {family} layers ({layers}) "
                                 f"already have it; name the layers to change, e.g. --scheme local={plain}")
        out += [(i, new) for i in chosen]
    taken: dict[int, str] = {}
    for selector, text in pairs:  # each replaces what the unqualified part gave its layers
        new = positions.pin(text, length)
        for i in select(selector, names):
            if i in taken:
                raise ValueError(f"layer L{i} is selected by both {taken[i]!r} and {selector!r} in {spec!r}; give "
                                 "each layer one scheme")
            taken[i] = selector
            out.append((i, new))
    return out
