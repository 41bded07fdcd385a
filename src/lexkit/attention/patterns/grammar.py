"""The spec's grammar: :func:`create` reads what a pattern's ``spec`` prints, one registered pattern
(``NAME[:PARAMS]``) or patterns joined by ``|`` (:class:`~.algebra.Either`) and ``&``
(:class:`~.algebra.Both`): ``window:64|first:4`` is ``Either(Window(64), First(4))``; ``&`` binds
tighter than ``|`` (as in Python), both group from the left, and parentheses group
(``(window:64|first:4)&chunk:128``). :func:`pattern_help` tells it: the help of every ``--pattern``
flag, made from the registry.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...core.specs import parse_params, split_spec
from .algebra import Both, Either
from .base import PATTERNS, Pattern


def create(spec: str | Pattern, *, default_window: int | None = None) -> Pattern:
    """Build a pattern from a spec: ``causal``, ``window:128``, ``window:W=128``, ``bca:256``, or
    patterns joined by ``|`` (:class:`Either`, attention-gym's ``or_masks``) and ``&`` (:class:`Both`,
    ``and_masks``), so that every pattern's ``spec`` reads back::

        pattern := term ('|' term)*        a|b|c is Either(Either(a, b), c)
        term    := atom ('&' atom)*        & binds tighter than |, as in Python
        atom    := NAME[:PARAMS] | '(' pattern ')'

    A pattern's W defaults to ``default_window`` (the model's training length) when the spec
    gives none; without either, ``ValueError``. An error in one operand is one line naming it.
    """
    if isinstance(spec, Pattern):
        return spec
    if isinstance(spec, str) and _GRAMMAR.search(spec):
        return _Reader(spec, default_window).read()
    return _named(spec, default_window)


def _named(spec: str, default_window: int | None) -> Pattern:
    """One registered pattern from ``NAME[:PARAMS]``, its None defaults set to ``default_window``."""
    name, items = split_spec(spec)
    cls = PATTERNS.get(name)
    values = parse_params(f"pattern {name}", cls.params, items, positional=cls.positional)
    for key, param in cls.params.items():
        if values[key] is None:
            if default_window is None:
                raise ValueError(
                    f"pattern {name} needs its {key} when no training length is known (e.g. {name}:128)"
                )
            values[key] = param.parse(f"pattern {name}", key, default_window)
    return cls(**values)


#: the characters of the composition grammar: its two operators and parentheses
_GRAMMAR = re.compile(r"([|&()])")  # a group: split keeps them
#: what joins two patterns: the combinator of each operator
_JOIN: dict[str, type[Pattern]] = {"|": Either, "&": Both}


class _Reader:
    """Recursive descent over the tokens of a composed spec (:func:`create`'s grammar): operators,
    parentheses and the operand texts between them (stripped; each read by :func:`_named`)."""

    def __init__(self, text: str, default_window: int | None) -> None:
        self.text, self.default_window = text, default_window
        self.tokens = [t for t in (piece.strip() for piece in _GRAMMAR.split(text)) if t]
        self.at = 0

    def read(self) -> Pattern:
        pattern = self.loose()
        if self.peek() is not None:  # `loose` stops early only at a ')'
            raise self.error("a ')' without its '('")
        return pattern

    def loose(self) -> Pattern:
        """pattern := term ('|' term)*"""
        return self.chain("|", self.tight)

    def tight(self) -> Pattern:
        """term := atom ('&' atom)*"""
        return self.chain("&", self.atom)

    def chain(self, operator: str, part) -> Pattern:
        """``part`` (operator ``part``)*, joined from the left."""
        pattern = part()
        while self.peek() == operator:
            self.at += 1
            pattern = self.join(operator, pattern, part())
        return pattern

    def atom(self) -> Pattern:
        """atom := NAME[:PARAMS] | '(' pattern ')', never followed by another atom."""
        token = self.peek()
        if token is None or token in "|&)":
            raise self.error(self.missing(token))
        self.at += 1
        if token == "(":
            pattern = self.loose()
            if self.peek() != ")":
                raise self.error("a '(' without its ')'")
            self.at += 1
        else:
            try:
                pattern = _named(token, self.default_window)
            except ValueError as exc:
                raise self.error(f"operand {token!r}: {exc}") from None
        if self.peek() == "(":
            raise self.error(f"a '(' right after {self.tokens[self.at - 1]!r}; join patterns with | or &")
        return pattern

    def join(self, operator: str, first: Pattern, second: Pattern) -> Pattern:
        """``Either`` or ``Both`` of two parts; a part scored at cache positions (``pos=cache``, whose
        rescoring assumes it is the layer's only rule) is refused, as :func:`intersect` does."""
        for part, other in ((first, second), (second, first)):
            if part.cache_positions:
                raise self.error(f"{part.spec} scores its sinks at cache positions and cannot be combined "
                                 f"with {other.spec}; use pos=text")
        return _JOIN[operator](first, second)

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def missing(self, token: str | None) -> str:
        """Where an operand is missing: ``nothing before '|'``, ``after``, ``between '|' and '|'``."""
        before = self.tokens[self.at - 1] if self.at else None
        where = (f"nothing before {token!r}" if before is None else f"nothing after {before!r}" if token is None
                 else f"nothing between {before!r} and {token!r}")
        return f"{where}; write A|B (either) or A&B (both), each a pattern ({', '.join(PATTERNS.names())})"

    def error(self, why: str) -> ValueError:
        return ValueError(f"pattern {self.text!r}: {why}")


def written(cls: type[Pattern]) -> str:
    """How a registered pattern is written, its parameters in brackets: ``causal``, ``window[:W]``,
    ``sinks[:W,K=4,pos=text]`` (a parameter with no default, resolved later, by its key alone)."""
    items = [key if param.default is None else f"{key}={_value(param.default)}" for key, param in cls.params.items()]
    return f"{cls.name}[:{','.join(items)}]" if items else cls.name


def _value(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def pattern_help(*, default: str | Sequence[str] | None = None, repeatable: bool = False,
                 selectors: bool = False, extra: str = "") -> str:
    """The help of a ``--pattern`` flag, made from the registry (a pattern registered by ``--import``
    before the parser is made shows too): every registered pattern as it is written (:func:`written`),
    the two operators of the grammar, and where the command resolves a pattern per layer
    (``selectors``: ``lexkit.layouts.select``) the ``SELECTOR=SPEC`` form; then ``extra`` (what the
    command adds), ``repeatable`` and the ``default``. Safe for argparse (a ``%`` is doubled)."""
    parts = [f"attention pattern: {', '.join(written(cls) for cls in PATTERNS)} (`lexkit patterns` says "
             "what each sees); W left out is the model's training length",
             "A|B for either (first:4|window:64 is sinks:64), A&B for both (& binds tighter; parentheses group)"]
    if selectors:
        parts.append("on a model whose layers differ, inside each layer's own, or SELECTOR=SPEC for the layers a "
                     "selector names (global=window:4096, local=causal, L0-2=..., an hf: model's layer types)")
    if extra:
        parts.append(extra)
    shown = None if default is None else default if isinstance(default, str) else ", ".join(default)
    if repeatable:
        parts.append("repeatable" + (f" (default: {shown})" if shown is not None else ""))
    elif shown is not None:
        parts.append(f"default: {shown}")
    return "; ".join(parts).replace("%", "%%")
