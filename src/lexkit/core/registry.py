"""A registry of named classes: position schemes and attention patterns are both kept in one.

``register`` (usable as a decorator) adds a class under its ``name``; a second, different class
that claims a taken name is refused unless the caller asks to replace it (``replace=True``,
which warns, since every spec of that name then means something else). Registering the same
class again (or a reloaded copy of it: same module and qualified name) is harmless. Lookups of
an unknown name raise a ValueError that lists the valid names.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T", bound=type)

_GENERATION = [0]


def generation() -> int:
    """A counter every registration of any registry bumps: what a cache of things built from registered
    names (the model config's layer stacks) keys on, so a replaced class is never served stale."""
    return _GENERATION[0]


class Registry(Generic[T]):
    def __init__(self, noun: str, base: type, check: Callable[[type], None] | None = None) -> None:
        self.noun, self.base, self.check = noun, base, check  # noun: what it holds, as messages name it
        self._classes: dict[str, T] = {}

    def register(self, cls: T | None = None, *, replace: bool = False):
        """Add ``cls`` under ``cls.name``; ``@registry.register`` or ``register(cls, replace=True)``."""
        if cls is None:
            return lambda c: self.register(c, replace=replace)
        if not (isinstance(cls, type) and issubclass(cls, self.base)):
            raise TypeError(f"register expects a {self.base.__name__} subclass, got {cls!r}")
        name = getattr(cls, "name", "")
        if not name:
            raise ValueError(f"{cls.__name__} has no `name`")
        if self.check is not None:
            self.check(cls)
        old = self._classes.get(name)
        if old is not None and not _same(old, cls):
            if not replace:
                raise ValueError(
                    f"{self.noun} {name!r} is already registered ({_where(old)}); give the new one "
                    f"({_where(cls)}) another name, or register it with replace=True"
                )
            warnings.warn(f"{self.noun} {name!r} ({_where(old)}) is replaced by {_where(cls)}", stacklevel=2)
        if old is not cls:
            _GENERATION[0] += 1
        self._classes[name] = cls
        return cls

    def get(self, name: str) -> T:
        if name not in self._classes:
            raise ValueError(f"unknown {self.noun} {name!r}; valid: {', '.join(self._classes)}")
        return self._classes[name]

    def names(self) -> list[str]:
        return list(self._classes)

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._classes.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._classes


def _same(a: type, b: type) -> bool:
    return a is b or (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
