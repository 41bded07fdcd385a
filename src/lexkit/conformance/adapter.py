"""The adapter interface: how an implementation of RoPE is put under the suite.

An :class:`Adapter` builds, for a :class:`~lexkit.conformance.RopeConfig`, an :class:`Embedding`: any
object with one or more of the four methods below (the harness checks those it finds and says
``n/a`` for the rest). Every call passes the positions of one forward pass, ``pos`` [n] (int64,
chosen points, not necessarily contiguous: the current length is max(pos) + 1); calls within one case
go to the same embedding in order, so state that a runtime keeps between forward passes (dynamic NTK
after a longer call, LongRoPE's switch) is exercised.

* ``frequencies(pos) -> (inv_freq [r/2], attention_factor)``: what the embedding uses for this call;
* ``tables(pos) -> (cos, sin)``, each [n, r/2] in ``config.dtype``, pair i's cos and sin times the
  attention factor (a runtime that stores them duplicated, [n, r], returns one half);
* ``rotate(x, pos) -> x'``: x [H, n, h] in ``config.dtype`` with pairs (i, i + r/2) ("rotate-half");
  a runtime with interleaved pairs (2i, 2i+1) converts with :func:`to_interleaved` and back with
  :func:`from_interleaved`;
* ``scores(q, k, pos) -> [H, n, n]``: q·k/√h after the position transform, q and k [H, n, h] at the
  same positions (xPos, ReRoPE: schemes whose q and k are not rotated alike);
* ``rotate_batch(x, pos) -> x'``: several sequences in one forward pass, x [B, H, n, h] and ``pos``
  [B, n], row b at its own positions (its current length max(pos[b]) + 1): what a runtime does with a
  batch of sequences of different lengths (the ``batch/`` cases ask only this).

A config the implementation cannot express is declined by :meth:`Adapter.supports` (a reason, shown as
``n/a``); one it should refuse (a factor below 1) it refuses by raising from ``build`` or the first
call. A call the runtime's engine would not serve (a position past the context it allocates for the
config) raises :class:`NotApplicable`: the case is ``n/a`` with that reason, not an ``error`` of the
runtime. An adapter that could not ask the runtime at all (its process died, hung or broke the
protocol) raises :class:`Unanswered`: an ``error`` cell, never taken for a refusal. The smallest
adapter is two functions (:func:`from_functions`)::

    def my_tables(config, pos):
        inv = 1.0 / config.base ** (torch.arange(0, config.rotary_dims, 2) / config.rotary_dims)
        ang = pos[:, None].float() * inv
        return ang.cos().to(config.dtype), ang.sin().to(config.dtype)

    MyRuntime = conformance.from_functions("my-runtime", tables=my_tables,
                                           supports=lambda c: None if c.scaling == "none" else "RoPE only")
"""

from __future__ import annotations

import importlib
import logging
import warnings
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from ..core.registry import Registry
from .config import RopeConfig

#: the checks an embedding may offer, in the order the harness runs them
CHECKS = ("frequencies", "tables", "rotate", "scores", "rotate_batch")


class NotApplicable(Exception):
    """A call the implementation declines by its own rule, not by a bug: its message is the reason
    (``position 8191 is past the 4096 positions vLLM's engine serves this config``)."""


class Unanswered(RuntimeError):
    """The adapter could not get an answer from the implementation (the other interpreter died, gave no
    answer in time, or broke the protocol): says nothing of the runtime, so no refusal case passes on it."""


@runtime_checkable
class Embedding(Protocol):
    """Documentation of the duck type; an embedding defines any subset of these."""

    def frequencies(self, pos: Tensor) -> tuple[Tensor, float]: ...
    def tables(self, pos: Tensor) -> tuple[Tensor, Tensor]: ...
    def rotate(self, x: Tensor, pos: Tensor) -> Tensor: ...
    def scores(self, q: Tensor, k: Tensor, pos: Tensor) -> Tensor: ...
    def rotate_batch(self, x: Tensor, pos: Tensor) -> Tensor: ...


class Adapter:
    """Base class of an implementation under test. Subclasses set ``name``, the ``modules`` it
    imports (a missing one makes the adapter unavailable, skipped by name) and the ``extra`` that
    installs them (``pip install -e '.[EXTRA]'``), and define :meth:`build` (and
    :meth:`supports`, :meth:`version` where it helps)."""

    name: str = ""
    modules: tuple[str, ...] = ()
    extra: str | None = None
    #: one line: what of the runtime is exercised (its classes or functions)
    summary: str = ""

    def unavailable(self) -> str | None:
        """Why the adapter cannot run here (a module that does not import), or None."""
        for module in self.modules:
            try:
                _quiet_import(module)
            except Exception as exc:  # a broken install raises anything while it imports
                top = (getattr(exc, "name", None) or "").split(".")[0]
                missing = isinstance(exc, ModuleNotFoundError) and top == module.split(".")[0]
                hint = f" (pip install -e '.[{self.extra}]')" if self.extra and missing else ""  # not when broken
                first = (str(exc).splitlines() or [""])[0]
                return f"{module} does not import: {type(exc).__name__}: {first}{hint}"
        return None

    def version(self) -> str:
        """The implementation's version (the first module's ``__version__``, else its distribution's)."""
        if not self.modules:
            return ""
        top = self.modules[0].split(".")[0]
        module = importlib.import_module(top)
        found = getattr(module, "__version__", None)
        if found:
            return str(found)
        from importlib import metadata

        for dist in (top, top.replace("_", "-")):
            try:
                return metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
        return ""

    def supports(self, config: RopeConfig) -> str | None:
        """None when the implementation can express ``config``, else the reason it cannot."""
        return None

    def build(self, config: RopeConfig) -> object:
        """A fresh embedding for ``config`` (see the module docstring); raise to refuse it."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the adapter holds once its cases ran (an out-of-process side's interpreter)."""


def _quiet_import(module: str) -> None:
    """Import ``module`` without the warnings and log lines a runtime prints while it loads (torchao's
    "no triton", torch.jit deprecations): they are not about the case."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importlib.import_module(module)
    finally:
        logging.disable(previous)


#: the implementations ``lexkit conformance --impl NAME`` knows (an ``--import`` module may add its own)
ADAPTERS: Registry = Registry("implementation", Adapter)
register = ADAPTERS.register


class _FunctionEmbedding:
    def __init__(self, config: RopeConfig, fns: dict[str, Callable]) -> None:
        for check, fn in fns.items():
            setattr(self, check, (lambda f: lambda *args: f(config, *args))(fn))


def from_functions(name: str, *, frequencies: Callable | None = None, tables: Callable | None = None,
                   rotate: Callable | None = None, scores: Callable | None = None,
                   supports: Callable[[RopeConfig], str | None] | None = None, version: str = "",
                   summary: str = "") -> type[Adapter]:
    """An adapter class from plain functions of ``(config, pos)`` (``rotate``: ``(config, x, pos)``;
    ``scores``: ``(config, q, k, pos)``), each what the :class:`Embedding` method of that name returns.
    Register the class (``conformance.register(cls)``) to reach it from ``lexkit conformance --impl``."""
    fns = {k: v for k, v in (("frequencies", frequencies), ("tables", tables), ("rotate", rotate),
                             ("scores", scores)) if v is not None}
    if not fns:
        raise ValueError(f"adapter {name!r}: give at least one of {', '.join(CHECKS)}")

    def build(self, config: RopeConfig) -> object:
        return _FunctionEmbedding(config, fns)

    def supports_method(self, config: RopeConfig) -> str | None:
        return supports(config) if supports is not None else None

    body = {"name": name, "summary": summary, "build": build, "supports": supports_method,
            "version": lambda self: version, "__module__": __name__}
    return type(f"FunctionAdapter_{name}", (Adapter,), body)


# -- pair layouts --------------------------------------------------------------------------------
def to_interleaved(x: Tensor, rot_dims: int) -> Tensor:
    """x [..., h] with pairs (i, i + r/2) -> pairs (2i, 2i + 1) in the first r dims (the rest kept)."""
    half = rot_dims // 2
    pairs = x[..., :rot_dims].unflatten(-1, (2, half)).transpose(-1, -2).flatten(-2)
    return pairs if rot_dims == x.shape[-1] else torch.cat((pairs, x[..., rot_dims:]), dim=-1)


def from_interleaved(x: Tensor, rot_dims: int) -> Tensor:
    """The inverse of :func:`to_interleaved`."""
    half = rot_dims // 2
    pairs = x[..., :rot_dims].unflatten(-1, (half, 2)).transpose(-1, -2).flatten(-2)
    return pairs if rot_dims == x.shape[-1] else torch.cat((pairs, x[..., rot_dims:]), dim=-1)
