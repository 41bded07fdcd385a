"""Adapters whose runtime runs in another interpreter: its own virtualenv, with pins that conflict with
lexkit's torch (mlx-lm, vLLM, llama.cpp's bindings). The harness, the reference and the tolerances stay
here; the runtime's side (:mod:`lexkit.conformance.sides`, plain Python and numpy) answers over a pipe,
one JSON line per request (the protocol: ``sides/protocol.py``). ``lexkit conformance --python
NAME=PATH`` names the interpreter of an adapter; without it, this one's.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import torch
from torch import Tensor

from .adapter import Adapter
from .config import RopeConfig

#: the folder of the side modules and their protocol loop (put on the other interpreter's path)
SIDES = Path(__file__).parent / "sides"
#: seconds a side may take to answer one request (a first import of a runtime included)
TIMEOUT = 300.0


class RemoteError(RuntimeError):
    """The other interpreter refused, failed or died: its one line."""


def config_json(config: RopeConfig) -> dict:
    """``config`` as the protocol sends it: its fields, the dtype by name, infinity as null."""
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name == "dtype":
            value = str(value).removeprefix("torch.")
        elif f.name == "layers":
            value = [[name, config_json(c)] for name, c in value]
        elif isinstance(value, float) and math.isinf(value):
            value = None
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


class Side:
    """One interpreter running one side module: requests in, answers out, in order."""

    def __init__(self, python: str, module: str, folders: tuple[Path, ...] = (), env: dict | None = None) -> None:
        self.python, self.module = python, module
        path = [str(SIDES), *(str(f) for f in folders)]
        code = f"import sys; sys.path[:0] = {path!r}; import protocol; protocol.main({module!r})"
        try:
            self.process = subprocess.Popen([python, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True, bufsize=1,
                                            env=None if env is None else {**os.environ, **env})
        except OSError as exc:
            raise RemoteError(f"cannot start {python}: {exc.strerror or exc}") from None

    def ask(self, request: dict) -> dict:
        """The side's answer to ``request``; RemoteError for its error answer or its death."""
        process = self.process
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            line = process.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            process.wait(timeout=TIMEOUT)
            err = (process.stderr.read() or "").strip().splitlines()
            raise RemoteError(f"{self.python} ({self.module}) exited {process.returncode}"
                              + (f": {err[-1]}" if err else ""))
        reply = json.loads(line)
        if "error" in reply:
            raise RemoteError(reply["error"])
        return reply

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.write(json.dumps({"op": "bye"}) + "\n")
                self.process.stdin.close()
                self.process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                pipe.close()
            except OSError:  # a pipe the side's death already broke
                pass


class _Embedding:
    """The harness's view of an embedding built in the other interpreter."""

    def __init__(self, side: Side, config: RopeConfig) -> None:
        self.side, self.config = side, config
        reply = side.ask({"op": "build", "config": config_json(config)})
        self.id = reply["id"]
        for check in reply["checks"]:
            setattr(self, check, getattr(self, f"_{check}"))

    def _call(self, check: str, pos: Tensor, **more) -> dict:
        return self.side.ask({"op": "call", "id": self.id, "check": check, "pos": pos.tolist(), **more})

    def _frequencies(self, pos: Tensor) -> tuple[Tensor, float]:
        reply = self._call("frequencies", pos)
        return torch.tensor(reply["inv_freq"], dtype=torch.float64), float(reply["a"])

    def _tables(self, pos: Tensor) -> tuple[Tensor, Tensor]:
        reply = self._call("tables", pos)
        return (torch.tensor(reply["cos"], dtype=torch.float64).reshape(pos.numel(), -1),
                torch.tensor(reply["sin"], dtype=torch.float64).reshape(pos.numel(), -1))

    def _rotate(self, x: Tensor, pos: Tensor) -> Tensor:
        reply = self._call("rotate", pos, x=x.to(torch.float64).tolist())
        return torch.tensor(reply["y"], dtype=torch.float64).reshape(x.shape)

    def _rotate_batch(self, x: Tensor, pos: Tensor) -> Tensor:
        reply = self._call("rotate_batch", pos, x=x.to(torch.float64).tolist())
        return torch.tensor(reply["y"], dtype=torch.float64).reshape(x.shape)

    def _scores(self, q: Tensor, k: Tensor, pos: Tensor) -> Tensor:
        reply = self._call("scores", pos, q=q.to(torch.float64).tolist(), k=k.to(torch.float64).tolist())
        return torch.tensor(reply["s"], dtype=torch.float64).reshape(q.shape[0], pos.numel(), pos.numel())


class RemoteAdapter(Adapter):
    """An adapter whose ``side`` module runs in ``python`` (default: this interpreter), started on
    first use and kept for the run. ``probe``: the module the other interpreter must import."""

    side: str = ""
    probe: str = ""
    python: str = sys.executable
    #: folders besides :data:`SIDES` where the side module is found (a test's own side)
    folders: tuple[Path, ...] = ()
    #: the command that installs the runtime into its own environment (said when it is missing)
    install: str = ""
    #: environment variables of the side's process (the in-process adapter a lexkit side runs)
    env: dict | None = None

    def __init__(self, python: str | None = None) -> None:
        if python is not None:
            self.python = python
        self._side: Side | None = None
        self._info: dict | None = None

    def _connect(self) -> Side:
        if self._side is None:
            self._side = Side(self.python, self.side, self.folders, self.env)
        return self._side

    def unavailable(self) -> str | None:
        where = "" if self.python == sys.executable else f" in {self.python}"
        try:
            done = subprocess.run([self.python, "-c", f"import {self.probe or 'json'}"], capture_output=True,
                                  text=True, timeout=TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"cannot run {self.python}: {getattr(exc, 'strerror', None) or exc}"
        if done.returncode:
            last = (done.stderr.strip().splitlines() or [""])[-1]
            hint = f" (install it there: {self.install}; then --python {self.name}=ENV/bin/python)" \
                if self.install else ""
            return f"{self.probe} does not import{where}: {last}{hint}"
        return None

    def info(self) -> dict:
        if self._info is None:
            self._info = self._connect().ask({"op": "hello"})
        return self._info

    def version(self) -> str:
        return str(self.info().get("version", ""))

    def supports(self, config: RopeConfig) -> str | None:
        return self._connect().ask({"op": "supports", "config": config_json(config)})["reason"]

    def build(self, config: RopeConfig) -> object:
        return _Embedding(self._connect(), config)

    def close(self) -> None:
        if self._side is not None:
            self._side.close()
            self._side = None


def elsewhere(name: str, python: str) -> RemoteAdapter:
    """lexkit's in-process adapter ``name`` run in the interpreter ``python`` (an environment with
    lexkit and another release of the runtime): :mod:`lexkit.conformance.sides.lexkit_side`."""
    from .adapter import ADAPTERS

    inner = ADAPTERS.get(name)
    cls = type(f"Elsewhere_{inner.__name__}", (RemoteAdapter,), {
        "name": name, "side": "lexkit_side", "probe": "lexkit.conformance", "summary": inner.summary,
        "env": {"LEXKIT_SIDE_ADAPTER": name}, "__module__": __name__})
    return cls(python)
