"""The layer stack: what every layer of a model is, as objects, built once from a layout spec.

A :class:`Layer` is a scheme (its canonical, pinned spec), its own :class:`~lexkit.attention.Pattern`
and its modifiers (:mod:`lexkit.attention.modifiers`), and for a Hugging Face model its layer type. A
:class:`LayerStack` is the layers of one model with the lengths they were pinned at; the model, the run
config, the KV cache, the instruments and the Hugging Face path read it, and an evaluation pattern is
resolved against it once per spec (:meth:`LayerStack.resolve`, kept on the stack).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

from .. import positions
from ..attention import Pattern
from ..attention import create as create_pattern
from ..attention.modifiers import Modifier, Shape, canonical_order
from ..attention.modifiers import parse as parse_modifier
from ..core.specs import split_spec
from .select import chosen_schemes, resolve_pattern, select, split_overrides


class LayoutError(ValueError):
    """A layout spec that cannot be built (one line naming the layer)."""


@dataclasses.dataclass(frozen=True)
class Layer:
    """One layer: ``scheme`` (canonical spec, training-length defaults pinned), its own ``pattern``
    (W resolved), its ``modifiers`` (canonical order) and, on a Hugging Face model, its transformers
    layer ``type``. Layers compare by what they are, so equal layers run alike."""

    scheme: str
    pattern: Pattern = dataclasses.field(default_factory=lambda: create_pattern("causal"))
    modifiers: tuple[Modifier, ...] = ()
    type: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.pattern, str):
            object.__setattr__(self, "pattern", create_pattern(self.pattern))
        object.__setattr__(self, "modifiers", canonical_order(self.modifiers))

    @property
    def spec(self) -> str:
        """``rope@window:16+shift``: the layer as a layout writes it."""
        return f"{self.scheme}@{self.pattern.spec}" + "".join(f"+{m.spec}" for m in self.modifiers)

    def full(self, position_len: int) -> str:
        """The layer with every parameter written out, defaults included."""
        return (f"{positions.full(self.scheme, position_len)}@{self.pattern.spec}"
                + "".join(f"+{m.full}" for m in self.modifiers))

    @property
    def scope(self) -> str:
        """``local`` (its pattern has a finite reach) or ``global`` (:func:`scope_of`)."""
        return scope_of(self.pattern)

    @property
    def names(self) -> tuple[str, ...]:
        """What a selector may call it (``--pattern NAME=SPEC``): its type (a Hugging Face layer) and scope."""
        return (self.type, self.scope) if self.type else (self.scope,)

    @property
    def scheme_class(self) -> type[positions.Scheme]:
        return positions.get(split_spec(self.scheme)[0])

    def at(self, place: str) -> tuple[Modifier, ...]:
        """Its modifiers that act at ``place`` (:data:`lexkit.attention.modifiers.PLACES`), in order."""
        return tuple(m for m in self.modifiers if m.place == place)

    def find(self, name: str) -> Modifier | None:
        """Its modifier named ``name``, or of group ``name`` (``temperature``), or None."""
        return next((m for m in self.modifiers if name in (m.name, m.group)), None)

    @property
    def temperature(self) -> Modifier | None:
        """Its temperature (the modifier of group ``temperature``), or None."""
        return self.find("temperature")

    def replace(self, **changes) -> Layer:
        return dataclasses.replace(self, **changes)

    def __str__(self) -> str:
        return self.spec


def scope_of(pattern: Pattern) -> str:
    """What a selector calls a layer under ``pattern``: ``local`` (a finite reach: window, bca, chunk,
    sinks) or ``global``."""
    return "global" if pattern.reach is None else "local"


def _written(keys: Sequence, texts: Sequence[str]) -> str:
    """``texts`` joined by ``;``, each run of equal ``keys`` written once as ``(text)xN``."""
    out, i = [], 0
    while i < len(texts):
        j = i
        while j + 1 < len(texts) and keys[j + 1] == keys[i]:
            j += 1
        out.append(texts[i] if j == i else f"({texts[i]})x{j - i + 1}")
        i = j + 1
    return ";".join(out)


def _looped(keys: Sequence, texts: Sequence[str], weights: Sequence[int]) -> str:
    """``texts`` written as :func:`_written` does (all of it, when every layer runs its own weights),
    each loop (layers that run another's weights) as ``(body)^N``: the body once, run N times with the
    same weights. LayoutError when ``weights`` is
    not a sequence of loops (a layer may only run the weights of the same layer of an earlier pass
    of its loop's body)."""
    out, i, n, rebuilt = [], 0, len(texts), []
    while i < n:
        j = next((t for t in range(i, n) if weights[t] != t), n)  # the first layer that runs another's weights
        if j == n:
            out.append(_written(keys[i:], texts[i:]))
            rebuilt += range(i, n)
            break
        start = weights[j]
        size = j - start
        if not i <= start < j:
            raise LayoutError(f"layer {j} runs layer {start}'s weights: layers share weights only as the passes "
                              "of a loop '(...)^N'")
        if start > i:
            out.append(_written(keys[i:start], texts[i:start]))
        passes = 1
        while start + (passes + 1) * size <= n and all(weights[start + passes * size + t] == start + t
                                                       for t in range(size)):
            passes += 1
        out.append(f"({_written(keys[start:j], texts[start:j])})^{passes}")
        rebuilt += list(range(i, j)) + [start + t for _ in range(passes - 1) for t in range(size)]
        i = start + passes * size
    if rebuilt != list(weights):
        raise LayoutError("layers share weights only as the passes of a loop '(...)^N' (each pass runs the "
                          "first pass's weights)")
    return ";".join(out)


def canonical(layers: Sequence[Layer], weights: Sequence[int] | None = None) -> str:
    """The written-out spec of ``layers``, runs of equal layers as ``(...)xN`` and loops (``weights``:
    the layer whose weights each runs) as ``(...)^N``."""
    return _looped(layers, [layer.spec for layer in layers], range(len(layers)) if weights is None else weights)


def check(layers: Sequence[Layer]) -> None:
    """Rules across layers: an absolute scheme is every layer's or none's."""
    for i, layer in enumerate(layers):
        if layer.scheme_class.family == "absolute" and any(other.scheme != layer.scheme for other in layers):
            raise LayoutError(f"layout layer {i}: {layer.scheme} adds positions to the token embeddings, not to a "
                              "layer; an absolute scheme must be every layer's")


class LayerStack:
    """Every layer of one model (:class:`Layer`), pinned at ``train_len`` (patterns, temperatures;
    a pattern's default W at evaluation) and ``position_len`` (schemes: a learned table's size,
    ReRoPE's w, a scaling's original length).
    ``weights``: for each layer, the layer whose weights it runs (itself, or in a loop ``(...)^N`` the
    same layer of the loop's first pass: weight-tied depth); None: every layer its own.
    Immutable; an evaluation pattern resolved against it is kept per spec."""

    def __init__(self, layers: Sequence[Layer], *, train_len: int | None, position_len: int | None = None,
                 weights: Sequence[int] | None = None) -> None:
        if not layers:
            raise LayoutError("a layer stack needs at least one layer")
        self.layers: tuple[Layer, ...] = tuple(layers)
        self.train_len = None if train_len is None else int(train_len)  # None: a pretrained model that says none
        self.position_len = position_len or self.train_len
        self.weights: tuple[int, ...] = tuple(range(len(self.layers))) if weights is None else tuple(map(int, weights))
        if len(self.weights) != len(self.layers):
            raise LayoutError(f"a stack of {len(self.layers)} layers needs as many weight sources, got "
                              f"{len(self.weights)}")
        for i, source in enumerate(self.weights):
            if not 0 <= source <= i or self.weights[source] != source:
                raise LayoutError(f"layer {i} cannot run layer {source}'s weights: a loop's passes run its first "
                                  "pass's")
            if self.layers[i] != self.layers[source]:
                raise LayoutError(f"layer {i} ({self.layers[i].spec}) runs the weights of layer {source} "
                                  f"({self.layers[source].spec}), a pass of the same loop: both must be the same layer")
        check(self.layers)
        if self.looped:
            self.canonical()  # LayoutError unless the ties are loops
        self._resolved: dict = {}

    # -- what it is ----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, i: int) -> Layer:
        return self.layers[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LayerStack) and other.layers == self.layers and other.weights == self.weights

    def __hash__(self) -> int:
        return hash((self.layers, self.weights))

    def __repr__(self) -> str:
        return f"LayerStack({self.canonical()!r})"

    @property
    def looped(self) -> bool:
        """Some layer runs another's weights (a loop ``(...)^N``)."""
        return any(source != i for i, source in enumerate(self.weights))

    @property
    def uniform(self) -> bool:
        """Every layer the same (one scheme, pattern and set of modifiers)."""
        return all(layer == self.layers[0] for layer in self.layers)

    @property
    def shifts_tokens(self) -> bool:
        """Some layer shifts tokens itself (its ``+shift`` modifier, or a named layout's ``shift=F``):
        the one answer to whether a model-wide token shift would come on top of the layout's own."""
        return any(layer.find("shift") is not None for layer in self.layers)

    @property
    def own(self) -> tuple[Pattern, ...]:
        """Each layer's own pattern."""
        return tuple(layer.pattern for layer in self.layers)

    @property
    def selector_names(self) -> list[tuple[str, ...]]:
        """What selectors call each layer (:attr:`Layer.names`)."""
        return [layer.names for layer in self.layers]

    def canonical(self) -> str:
        """The written-out layout, runs of equal layers as ``(...)xN``, loops as ``(...)^N``."""
        return canonical(self.layers, self.weights)

    def resolved(self) -> str:
        """Every layer with every parameter written out, defaults included: what a run records as
        ``resolved`` beside its config, so that a later change of a registered default cannot change
        what an old run runs (and the study keys its cache on it)."""
        texts = [layer.full(self.position_len) for layer in self.layers]
        return _looped(texts, texts, self.weights)

    def check(self, shape: Shape) -> None:
        """Every modifier checked against the layer shape it runs on; LayoutError naming the layer."""
        for i, layer in enumerate(self.layers):
            for modifier in layer.modifiers:
                try:
                    modifier.check(shape)
                except ValueError as exc:
                    where = "" if self.uniform else f"layer {i} ({layer.spec}): "
                    raise LayoutError(f"{where}{exc}") from None

    def inert(self, lengths: Sequence[int]) -> tuple[str, str] | None:
        """The first modifier whose settings make it do nothing at every one of ``lengths``
        (:meth:`Modifier.inert_at`: ``topk:K`` with K at least the longest): what it is (``+topk:64``,
        with its layer where the layers differ) and why at the last length; None: every modifier
        acts at one of them, or may."""
        for i, layer in enumerate(self.layers):
            for modifier in layer.modifiers:
                whys = [modifier.inert_at(int(n)) for n in lengths]
                if whys and all(whys):
                    where = "" if self.uniform else f"layer {i} ({layer.spec}): "
                    return f"{where}+{modifier.spec}", whys[-1]
        return None

    # -- what an evaluation means on it ----------------------------------------------------------
    def resolve(self, spec: str | Pattern = "causal") -> Pattern:
        """An evaluation pattern on this stack (:func:`lexkit.layouts.select.resolve_pattern`): a plain
        pattern when every layer gets the same one, else a ``Layered`` one. Resolved once per spec, kept
        under a string key: a compiled training step traces this lookup, and a Pattern key left by an
        evaluation on a stack that models of one config share (a ``Sinks``, whose spec dynamo cannot
        trace) made every later compiled step of that config train eagerly."""
        key = spec if isinstance(spec, str) else f"{type(spec).__module__}.{type(spec).__qualname__} {spec.spec}"
        if key not in self._resolved:
            self._resolved[key] = resolve_pattern(self.own, self.selector_names, spec, default_window=self.train_len)
        return self._resolved[key]

    def replace_schemes(self, spec: str) -> LayerStack:
        """This stack with the schemes an evaluation ``--scheme`` gives (``rope:scaling=yarn,factor=4``,
        ``global=rerope:w=64``), pinned at its ``position_len`` (:func:`lexkit.layouts.select.chosen_schemes`)."""
        layers = list(self.layers)
        for i, scheme in chosen_schemes([layer.scheme for layer in layers], [layer.names for layer in layers],
                                        spec, self.position_len):
            layers[i] = layers[i].replace(scheme=scheme)
        return self.with_layers(layers)

    def add_modifiers(self, spec: str) -> LayerStack:
        """This stack with the modifiers an evaluation ``--add`` gives (``topk:4``: every layer;
        ``global=topk:4``, ``L1=softcap:30;local=adaptive``: the layers a selector names), each pinned at
        the training length and checked as a layout's are (one attention variant a layer, ...). A
        modifier with learned state is refused: the run trained none for it."""
        plain, pairs = split_overrides(spec)
        added: list[list[Modifier]] = [[] for _ in self.layers]
        every = [(None, plain)] if plain is not None else []
        for selector, text in [*every, *pairs]:
            modifier = parse_modifier(text.lstrip("+"), self.train_len)
            if modifier.slot is not None:
                raise LayoutError(f"--add {text}: {modifier.name} has learned state, which the run did not train; "
                                  f"train it with the modifier (--layout ...+{modifier.name})")
            chosen = range(len(self.layers)) if selector is None else select(selector, self.selector_names)
            for i in chosen:
                if any(m.name == modifier.name for m in (*self.layers[i].modifiers, *added[i])):
                    raise LayoutError(f"--add {text}: layer {i} ({self.layers[i].spec}) has {modifier.name} already")
                added[i].append(modifier)
        layers = [layer.replace(modifiers=canonical_order((*layer.modifiers, *more))) if more else layer
                  for layer, more in zip(self.layers, added)]
        try:
            return self.with_layers(layers)
        except LayoutError as exc:
            raise LayoutError(f"--add {spec}: {exc}") from None

    def with_modifier(self, modifier: Modifier) -> LayerStack:
        """Every layer with ``modifier`` added (``--token-shift``: a shift on every layer)."""
        return self.with_layers([layer.replace(modifiers=(*layer.modifiers, modifier)) for layer in self.layers])

    def with_layers(self, layers: Sequence[Layer]) -> LayerStack:
        """A stack of ``layers`` in place of these, with these lengths and weight sources (a pass of a
        loop must stay the same layer as its first: LayoutError otherwise)."""
        return LayerStack(layers, train_len=self.train_len, position_len=self.position_len, weights=self.weights)
