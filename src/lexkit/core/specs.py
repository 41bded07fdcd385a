"""Spec strings and typed parameters, shared by position schemes and attention patterns.

A spec is ``name[:key=value,key=value,...]`` (``rope:base=10000``, ``window:W=128``). A pattern may
also take one bare value for its first parameter (``window:128``). Values are typed by the
parameter declaration (int, float, bool, str); a bad name, key or value raises ``ValueError``
that names the bad part and lists what is valid. Floats must be finite (or the parameter's own
default, ``rerope:k=inf``) and integers at most :data:`MAX_INT` in size, whatever else a parameter's
rule says.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from typing import Any


@dataclasses.dataclass(frozen=True)
class Param:
    """One typed, validated parameter of a scheme or pattern."""

    type: type
    default: Any
    doc: str = ""
    check: Callable[[Any], bool] | None = None
    rule: str = ""  # human-readable form of `check`, e.g. "> 0"

    def parse(self, owner: str, key: str, raw: Any) -> Any:
        value = raw
        if isinstance(raw, str):
            value = _convert(self.type, raw)
            if value is _BAD:
                raise ValueError(
                    f"{owner}: parameter {key}={raw} is not a valid {self.type.__name__}"
                )
        elif self.type is float and isinstance(raw, int) and not isinstance(raw, bool):
            value = float(raw)
        elif not isinstance(raw, self.type) or (self.type is int and isinstance(raw, bool)):
            raise ValueError(f"{owner}: parameter {key}={raw} is not a valid {self.type.__name__}")
        if isinstance(value, float) and not math.isfinite(value) and value != self.default:
            raise ValueError(f"{owner}: parameter {key}={raw} is not a finite number")  # inf only as a default
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
            raise ValueError(f"{owner}: parameter {key}={raw} is out of range (at most {MAX_INT:,} in size)")
        if value is not None and self.check is not None and not self.check(value):
            raise ValueError(f"{owner}: parameter {key}={raw} is out of range (must be {self.rule})")
        return value


#: the largest integer a parameter may take (exact in float64; no overflow in int64 arithmetic)
MAX_INT = 2**53

_BAD = object()
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _convert(kind: type, raw: str) -> Any:
    try:
        if kind is bool:
            low = raw.strip().lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            return _BAD
        if kind is int:
            return int(raw)
        if kind is float:
            return float(raw)
        return raw
    except ValueError:
        return _BAD


def split_spec(spec: str) -> tuple[str, list[str]]:
    """``"xpos:gamma=0.5,decay=false"`` -> ``("xpos", ["gamma=0.5", "decay=false"])``."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"empty spec {spec!r}")
    name, _, rest = spec.strip().partition(":")
    items = [item.strip() for item in rest.split(",")] if rest.strip() else []
    if any(not item for item in items):
        raise ValueError(f"spec {spec!r} has an empty parameter (write name:key=value,key=value)")
    return name.strip(), items


def parse_params(
    owner: str, params: dict[str, Param], items: list[str], *, positional: str | None = None
) -> dict[str, Any]:
    """Typed values for every parameter, defaults filled in.

    ``positional`` names the parameter a bare first value sets (``window:128``).
    """
    values: dict[str, Any] = {}
    for index, item in enumerate(items):
        key, eq, raw = item.partition("=")
        if not eq:
            if index == 0 and positional is not None:
                key, raw = positional, item
            else:
                raise ValueError(
                    f"{owner}: {item!r} is not key=value; valid keys: {_keys(params)}"
                )
        key = key.strip()
        if key not in params:
            raise ValueError(f"{owner}: unknown parameter {key!r}; valid keys: {_keys(params)}")
        if key in values:
            raise ValueError(f"{owner}: parameter {key!r} given twice")
        values[key] = params[key].parse(owner, key, raw.strip())
    for key, param in params.items():
        values.setdefault(key, param.default)
    return values


def spec_text(name: str, params: dict[str, Param], values: dict[str, Any]) -> str:
    """Canonical spec: only the values that differ from their defaults, in declaration order."""
    parts = [
        f"{key}={_fmt(values[key])}"
        for key, param in params.items()
        if values.get(key) != param.default
    ]
    return name + (":" + ",".join(parts) if parts else "")


def spec_number(x: float) -> str:
    """A number as a spec writes it: ``50``, ``10000``, ``1000000``, ``0.5``, ``30.5`` (whole numbers
    without a point, never ``1e+06``)."""
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def describe_params(params: dict[str, Param]) -> str:
    """``key=default, ...`` for listings; a None default (resolved later) shows as ``key=auto``."""
    return ", ".join(f"{k}={'auto' if p.default is None else _fmt(p.default)}" for k, p in params.items()) or "-"


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _keys(params: dict[str, Param]) -> str:
    return ", ".join(params) if params else "(none)"


def positive(x: Any) -> bool:
    return x > 0



def parse_lengths(lengths: str | int | Iterable[int]) -> list[int]:
    """Sequence lengths, from ``"1024, 256,1024"`` or ``[1024, 256]``: positive integers, returned
    sorted with duplicates dropped (``[256, 1024]``). Anything else is a ValueError that names
    the bad item (every command's ``--lengths`` and every library call share this one rule)."""
    def bad(why: str) -> ValueError:
        return ValueError(f"lengths must be positive integers, got {lengths!r}: {why}")

    if isinstance(lengths, str):
        items = [item.strip() for item in lengths.split(",")]
        if not lengths.strip() or any(not item for item in items):
            raise bad("expected a comma list such as 1024,2048")
        values = []
        for item in items:
            try:
                values.append(int(item))
            except ValueError:
                raise bad(f"{item!r} is not an integer") from None
    else:
        values = [lengths] if isinstance(lengths, int) else list(lengths)
        if not values:
            raise bad("expected at least one length")
        for value in values:
            if isinstance(value, bool) or not isinstance(value, int):
                raise bad(f"{value!r} is not an integer")
    for value in values:
        if value <= 0:
            raise bad(f"{value} is not a positive integer")
    return sorted(set(values))
