"""The written grammar of a layout: one :class:`Layer` per layer, read from ``SCHEME@PATTERN+MODIFIER``
texts (``rope@window:16+logn``), repeated with ``(...)xN``, checked across layers, written back out
canonically (docs/layouts.md)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from .. import positions
from ..attention import create as create_pattern
from ..attention import temperature as temperatures
from ..specs import split_spec

SINK = "sink"
SHIFT = "shift"
#: the fraction ``+shift`` alone shifts (x-transformers' ``shift_tokens=1``: half the features)
DEFAULT_SHIFT = 0.5
KINDS = ("local", "global")


@dataclasses.dataclass(frozen=True)
class Layer:
    """One layer of a layout, canonical: scheme spec, pattern spec (W resolved), temperature spec
    (None: none), whether it adds a learned sink logit per head, and the fraction of its input's
    features shifted from the position before (token shift; 0: none)."""

    scheme: str
    pattern: str = "causal"
    temperature: str | None = None
    sink: bool = False
    shift: float = 0.0

    @property
    def spec(self) -> str:
        out = f"{self.scheme}@{self.pattern}"
        if self.temperature:
            out += f"+{self.temperature}"
        out += f"+{SINK}" if self.sink else ""
        if self.shift:
            out += f"+{SHIFT}" if self.shift == DEFAULT_SHIFT else f"+{SHIFT}:{self.shift:g}"
        return out

    @property
    def kind(self) -> str:
        """``local`` (a pattern with finite reach) or ``global``."""
        return "global" if create_pattern(self.pattern).reach is None else "local"


class LayoutError(ValueError):
    """A layout spec that cannot be built (one line naming the layer)."""


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
_MODIFIER = re.compile(r"\+(?=[A-Za-z])")


def expand(text: str, whole: str) -> list[str]:
    """The layer texts of ``text``, repetitions unrolled."""
    out: list[str] = []
    for group in _split_top(text, ";"):
        if not group:
            raise LayoutError(f"layout {whole!r}: an empty layer (two ';' in a row, or one at an end)")
        count = 1
        match = _REPEAT.match(group)
        if match and (match.group(1).endswith(")") or "@" in match.group(1) or "+" in match.group(1)
                      or match.group(1).strip() in positions.names()):
            group, count = match.group(1).strip(), int(match.group(2))
            if count < 1:
                raise LayoutError(f"layout {whole!r}: repeat count {count} must be at least 1")
        if group.startswith("("):
            if not group.endswith(")"):
                raise LayoutError(f"layout {whole!r}: {group!r} must be '(LAYERS)xN'")
            inner = expand(group[1:-1], whole)
        else:
            inner = [group]
        out += inner * count
    return out


def parse_layer(text: str, *, scheme: str, train_len: int, max_len: int | None = None, where: str = "") -> Layer:
    """One layer's text (``rope@window:16+logn``) -> :class:`Layer`, canonical and pinned: every value
    that defaults to the training length written out (a pattern's W, ReRoPE's w, a scaled RoPE's
    original_len at ``max_len or train_len``, Llama 4's floor), so the layer stays what it was when
    the model trains or is fine-tuned at another length. ``scheme`` fills an omitted scheme.
    ValueError naming ``where`` (``layer 2``) and the bad part."""
    head, *mods = [m.strip() for m in _MODIFIER.split(text.strip())]
    scheme_text, at, pattern_text = (s.strip() for s in head.partition("@"))
    prefix = f"{where}: " if where else ""
    if at and not pattern_text:
        raise LayoutError(f"{prefix}{text!r} has '@' and no pattern after it")
    try:
        scheme_spec = positions.pin(scheme_text or scheme, max_len or train_len)
        pattern = create_pattern(pattern_text or "causal", default_window=train_len)
        temperature, sink, shift = None, False, 0.0
        for mod in mods:
            if mod == SINK:
                if sink:
                    raise ValueError("'+sink' given twice")
                sink = True
            elif mod.split(":")[0].strip() == SHIFT:
                if shift:
                    raise ValueError("'+shift' given twice")
                shift = parse_shift(mod)
            elif temperature is not None:
                raise ValueError(f"two temperatures ({temperature} and {mod}); a layer takes one")
            else:
                temperature = temperatures.pin(mod, train_len)
    except (ValueError, KeyError) as exc:
        raise LayoutError(f"{prefix}{exc}") from None
    layer = Layer(scheme_spec, pattern.spec, temperature, sink, shift)
    if temperature is not None and pattern.reach is not None:
        raise LayoutError(f"{prefix}temperature {temperature} grows with the position, but {pattern.spec} shows at "
                          f"most {pattern.reach} keys: a temperature belongs to a global layer (causal)")
    return layer


def parse_shift(text: str) -> float:
    """``shift`` (half the features, x-transformers' ``shift_tokens=1``) or ``shift:F``, F in (0, 1)."""
    _, colon, value = text.partition(":")
    if not colon:
        return DEFAULT_SHIFT
    try:
        fraction = float(value)
    except ValueError:
        raise ValueError(f"'+{text}': the shifted fraction must be a number in (0, 1)") from None
    if not 0 < fraction < 1:
        raise ValueError(f"'+{text}': the shifted fraction must be in (0, 1), got {value}")
    return fraction


def parse_written(text: str, *, n_layers: int, train_len: int, scheme: str = "rope",
                  max_len: int | None = None) -> list[Layer]:
    """A written-out layout (``rope@window:16 ; none@causal+logn``) -> one :class:`Layer` per layer of an
    ``n_layers`` model; k layers repeat to fill n when k divides n."""
    pieces = expand(text, text)
    if n_layers % len(pieces):
        raise LayoutError(f"layout {text!r} has {len(pieces)} layers and the model {n_layers}: give {n_layers} "
                          f"layers (or a number that divides it, repeated to fit; '(...)xN' repeats)")
    pieces = pieces * (n_layers // len(pieces))
    where = (lambda i: f"layout layer {i} ({pieces[i]!r})") if len(pieces) > 1 else (lambda i: f"layout {text!r}")
    layers = [parse_layer(p, scheme=scheme, train_len=train_len, max_len=max_len, where=where(i))
              for i, p in enumerate(pieces)]
    check(layers)
    return layers


def check(layers: Sequence[Layer]) -> None:
    """Rules across layers: an absolute scheme is every layer's or none's."""
    for i, layer in enumerate(layers):
        cls = positions.get(split_spec(layer.scheme)[0])
        if cls.family == "absolute" and any(other.scheme != layer.scheme for other in layers):
            raise LayoutError(f"layout layer {i}: {layer.scheme} adds positions to the token embeddings, not to a "
                              "layer; an absolute scheme must be every layer's")


def uniform(scheme: str, n_layers: int, *, logn: bool = False) -> list[Layer]:
    """Today's model: every layer ``scheme`` under causal attention (log-n on every layer)."""
    return [Layer(positions.canonical(scheme), "causal", "logn" if logn else None)] * n_layers


def canonical(layers: Sequence[Layer]) -> str:
    """The written-out spec of ``layers``, runs of equal layers as ``(...)xN``."""
    out, i = [], 0
    while i < len(layers):
        j = i
        while j + 1 < len(layers) and layers[j + 1] == layers[i]:
            j += 1
        count = j - i + 1
        out.append(layers[i].spec if count == 1 else f"({layers[i].spec})x{count}")
        i = j + 1
    return ";".join(out)


def resolved(layers: Sequence[Layer], *, train_len: int, max_len: int | None = None) -> str:
    """The layout with every parameter of every layer written out, defaults included
    (:func:`lexkit.positions.full`): what a run records beside its config, so that a later change
    of a registered default cannot change what an old run runs (and the study's cache keys on it)."""
    length = max_len or train_len
    return canonical([dataclasses.replace(layer, scheme=positions.full(layer.scheme, length),
                                          temperature=layer.temperature and temperatures.full(layer.temperature,
                                                                                              train_len))
                      for layer in layers])


def is_uniform(layers: Sequence[Layer]) -> bool:
    return all(layer == layers[0] for layer in layers)
