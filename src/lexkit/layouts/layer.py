"""The written grammar of a layout: one :class:`~lexkit.layouts.stack.Layer` per layer, read from
``SCHEME@PATTERN+MODIFIER`` texts (``rope@window:16+logn``), repeated with ``(...)xN``
(docs/layouts.md). :func:`build_layer` is the one place a layer is made, from text or from objects
(the named layouts build theirs without writing text): it pins every value that defaults to the
training length and checks the layer's rules."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .. import positions
from ..attention import Pattern
from ..attention import create as create_pattern
from ..attention import modifiers as mods
from .stack import Layer, LayerStack, LayoutError


# -- parsing ------------------------------------------------------------------------------------
def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split on ``sep`` outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise LayoutError(f"layout {text!r}: a ')' without its '('")
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise LayoutError(f"layout {text!r}: a '(' without its ')'")
    parts.append(text[start:])
    return [p.strip() for p in parts]


_REPEAT = re.compile(r"^(.*?)\s*x\s*(\d+)$", re.S)
#: a loop: ``(LAYERS)^N``, the layers run N times with the same weights
_LOOP = re.compile(r"^(.*?)\s*\^\s*(-?\d+)$", re.S)
#: a '+' that starts a modifier (a name follows, spaces allowed around it; never a number's exponent)
_MODIFIER = re.compile(r"\s*\+\s*(?=[A-Za-z])")
#: a '+' with no name after it: another '+' or the end of the layer follows
_EMPTY_MODIFIER = re.compile(r"\+\s*(?=\+|$)")


def expand(text: str, whole: str) -> list[str]:
    """The layer texts of ``text``, repetitions and loops unrolled."""
    return expand_looped(text, whole)[0]


def expand_looped(text: str, whole: str) -> tuple[list[str], list[int]]:
    """The layer texts of ``text`` unrolled, and for each the layer whose weights it runs: its own
    for ``(...)xN`` (N copies, each with its weights), the first pass's for ``(...)^N`` (one body run
    N times with the same weights: weight-tied depth)."""
    texts: list[str] = []
    weights: list[int] = []
    for group in _split_top(text, ";"):
        if not group:
            raise LayoutError(f"layout {whole!r}: an empty layer (two ';' in a row, or one at an end)")
        count, looped = 1, False
        loop = _LOOP.match(group)
        match = _REPEAT.match(group)
        if loop:
            if not loop.group(1).strip().startswith("(") or not loop.group(1).strip().endswith(")"):
                raise LayoutError(f"layout {whole!r}: {group!r}: a loop is '(LAYERS)^N'")
            group, count, looped = loop.group(1).strip(), int(loop.group(2)), True
        elif match and (match.group(1).endswith(")") or "@" in match.group(1) or "+" in match.group(1)
                        or match.group(1).strip() in positions.names()):
            group, count = match.group(1).strip(), int(match.group(2))
        if count < 1:
            raise LayoutError(f"layout {whole!r}: {'loop' if looped else 'repeat'} count {count} must be at least 1")
        if group.startswith("("):
            if not group.endswith(")"):
                raise LayoutError(f"layout {whole!r}: {group!r} must be '(LAYERS)xN' or '(LAYERS)^N'")
            inner, inner_weights = expand_looped(group[1:-1], whole)
        else:
            inner, inner_weights = [group], [0]
        first = len(texts)
        for _ in range(count):
            base = first if looped else len(texts)  # a pass of a loop runs the first pass's weights
            texts += inner
            weights += [base + w for w in inner_weights]
    return texts, weights


def build_layer(scheme: str, pattern: str | Pattern = "causal", modifiers: Sequence[str | mods.Modifier] = (), *,
                train_len: int, max_len: int | None = None, type: str | None = None, where: str = "") -> Layer:
    """One :class:`Layer`, canonical and pinned: every value that defaults to the training length
    written out (a pattern's W, ReRoPE's w, a scaled RoPE's original_len at ``max_len or train_len``,
    a temperature's length), so the layer stays what it was when the model trains or is fine-tuned
    at another length. ``modifiers`` are specs or :class:`~lexkit.attention.modifiers.Modifier`
    objects. LayoutError naming ``where`` (``layer 2``) and the bad part: an unknown name or
    parameter, a modifier given twice or two of one group (two temperatures, two attention
    variants), two that exclude each other (:attr:`Modifier.excludes`), a modifier that grows with
    the position on a local layer."""
    prefix = f"{where}: " if where else ""
    try:
        scheme_spec = positions.pin(scheme, max_len or train_len)
        pat = create_pattern(pattern, default_window=train_len)
        built = [m if isinstance(m, mods.Modifier) else mods.parse(m, train_len) for m in modifiers]
    except (ValueError, KeyError) as exc:
        raise LayoutError(f"{prefix}{exc}") from None
    seen: dict[str, mods.Modifier] = {}
    for i, modifier in enumerate(built):
        for key in (modifier.name, modifier.group):
            if key is None:
                continue
            if key in seen:
                what = (f"'+{modifier.name}' given twice" if key == modifier.name else
                        f"two {key}s ({seen[key].spec} and {modifier.spec}); a layer takes one")
                raise LayoutError(f"{prefix}{what}")
            seen[key] = modifier
        for other in built[i + 1:]:  # each pair named in the order the layer writes them (an --add: the run's)
            why = _excluded(modifier, other) or _excluded(other, modifier)
            if why is not None:
                raise LayoutError(f"{prefix}+{modifier.name} and +{other.name} cannot share a layer: {why}")
        if modifier.global_only and pat.reach is not None:
            raise LayoutError(f"{prefix}{modifier.spec} grows with the position, but {pat.spec} shows at most "
                              f"{pat.reach} keys: it belongs to a global layer (causal)")
    return Layer(scheme_spec, pat, tuple(built), type)


def _excluded(modifier: mods.Modifier, other: mods.Modifier) -> str | None:
    """Why ``modifier`` cannot share a layer with ``other`` (:attr:`Modifier.excludes`; None: it can)."""
    return next((modifier.excludes[key] for key in (other.name, other.group) if key in modifier.excludes), None)


def parse_layer(text: str, *, scheme: str, train_len: int, max_len: int | None = None, where: str = "") -> Layer:
    """One layer's text (``rope@window:16+logn``) -> :class:`Layer` (:func:`build_layer`); ``scheme``
    fills an omitted scheme. LayoutError naming ``where`` and the bad part."""
    if _EMPTY_MODIFIER.search(text.strip()):
        raise LayoutError(f"{where or repr(text)}: an empty modifier name (a '+' with no name after it); write "
                          "[SCHEME][@PATTERN]+NAME+NAME, e.g. none+kshift+gate")
    head, *modifiers = [m.strip() for m in _MODIFIER.split(text.strip())]
    scheme_text, at, pattern_text = (s.strip() for s in head.partition("@"))
    if at and not pattern_text:
        raise LayoutError(f"{where + ': ' if where else ''}{text!r} has '@' and no pattern after it")
    return build_layer(scheme_text or scheme, pattern_text or "causal", modifiers, train_len=train_len,
                       max_len=max_len, where=where)


def parse_written(text: str, *, n_layers: int, train_len: int, scheme: str = "rope",
                  max_len: int | None = None) -> LayerStack:
    """A written-out layout (``rope@window:16 ; none@causal+logn``) -> the stack of an ``n_layers``
    model; k layers repeat to fill n when k divides n."""
    pieces, sources = expand_looped(text, text)
    k = len(pieces)
    if n_layers % k:
        raise LayoutError(f"layout {text!r} has {k} layers and the model {n_layers}: give the model {k} layers "
                          f"(--layers {k}; a multiple of {k} repeats the layout to fit), or a layout of {n_layers} "
                          f"layers or of a number that divides {n_layers} ('(...)xN' repeats)")
    sources = [r * k + w for r in range(n_layers // k) for w in sources]  # each repetition its own weights
    pieces = pieces * (n_layers // k)
    where = (lambda i: f"layout layer {i} ({pieces[i]!r})") if len(pieces) > 1 else (lambda i: f"layout {text!r}")
    layers = [parse_layer(p, scheme=scheme, train_len=train_len, max_len=max_len, where=where(i))
              for i, p in enumerate(pieces)]
    return LayerStack(layers, train_len=train_len, position_len=max_len, weights=sources)


def uniform(scheme: str, n_layers: int, *, train_len: int, max_len: int | None = None,
            logn: bool = False) -> LayerStack:
    """Today's model: every layer ``scheme`` (canonical, its training-length defaults left to the
    model) under causal attention, log-n on every layer with ``logn``."""
    layer = Layer(positions.canonical(scheme), create_pattern("causal"),
                  (mods.parse("logn", train_len),) if logn else ())
    return LayerStack([layer] * n_layers, train_len=train_len, position_len=max_len)
