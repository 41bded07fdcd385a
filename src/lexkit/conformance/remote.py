"""Adapters whose runtime runs in another interpreter: its own virtualenv, with pins that conflict with
lexkit's torch (mlx-lm, vLLM, llama.cpp's bindings). The harness, the reference and the tolerances stay
here; the runtime's side (:mod:`lexkit.conformance.sides`, plain Python and numpy) answers over a pipe,
one JSON line per request (the protocol: ``sides/protocol.py``). ``lexkit conformance --python
NAME=PATH`` names the interpreter of an adapter; without it, this one's.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import torch
from torch import Tensor

from .adapter import Adapter, NotApplicable, Unanswered
from .config import RopeConfig

#: the folder of the side modules and their protocol loop (put on the other interpreter's path)
SIDES = Path(__file__).parent / "sides"
#: seconds a side may take to answer one request (a first import of a runtime included); a side that
#: takes longer is stopped and its case is an error (``lexkit conformance --timeout``)
TIMEOUT = 300.0


class RemoteError(RuntimeError):
    """The runtime in the other interpreter raised: its one line (a refusal of a config or a call)."""


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


#: the last lines of a side's stderr kept for the message of its death (the rest is read and dropped)
TAIL = 20


class Side:
    """One interpreter running one side module: requests in, answers out, in order, each within
    ``timeout`` seconds. Both of the side's output pipes are read as they fill (by a thread each), so a
    side that logs a lot never blocks on a full pipe; its stderr's last :data:`TAIL` lines are kept for
    the message of its death. A side that gives no answer in time, dies, or answers out of turn raises
    :class:`~lexkit.conformance.adapter.Unanswered` and is stopped: the adapter starts another."""

    def __init__(self, python: str, module: str, folders: tuple[Path, ...] = (), env: dict | None = None,
                 timeout: float = TIMEOUT) -> None:
        self.python, self.module, self.timeout = python, module, timeout
        self.seq, self.broken = 0, ""
        path = [str(SIDES), *(str(f) for f in folders)]
        code = f"import sys; sys.path[:0] = {path!r}; import protocol; protocol.main({module!r})"
        try:
            self.process = subprocess.Popen([python, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True, encoding="utf-8",
                                            errors="replace", bufsize=1,
                                            env=None if env is None else {**os.environ, **env})
        except OSError as exc:
            raise Unanswered(f"cannot start {python}: {exc.strerror or exc}") from None
        self.answers: queue.Queue = queue.Queue()
        self.stderr: collections.deque = collections.deque(maxlen=TAIL)
        self.readers = [threading.Thread(target=t, daemon=True) for t in (self._read_answers, self._read_stderr)]
        for reader in self.readers:
            reader.start()

    def _read_answers(self) -> None:
        try:
            for line in self.process.stdout:
                self.answers.put(line)
        except (OSError, ValueError):  # the pipe closed under the reader
            pass
        self.answers.put(None)  # end of stream: the side exited

    def _read_stderr(self) -> None:
        try:
            for line in self.process.stderr:
                if line.strip():
                    self.stderr.append(line.rstrip())
        except (OSError, ValueError):
            pass

    @property
    def alive(self) -> bool:
        return not self.broken and self.process.poll() is None

    def _fail(self, why: str) -> Unanswered:
        """Stop the side and the error that says why (its exit and stderr's last line where it died)."""
        self.broken = why
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        return Unanswered(f"{self.python} ({self.module}) {why}")

    def ask(self, request: dict) -> dict:
        """The side's answer to ``request``: RemoteError for the runtime's error answer,
        NotApplicable for a call it declines, Unanswered when no answer came (and the side is stopped)."""
        if self.broken:
            raise Unanswered(f"{self.python} ({self.module}) {self.broken}")
        self.seq += 1
        op = request.get("op")
        try:
            self.process.stdin.write(json.dumps({"seq": self.seq, **request}) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: the end of its answers says how
        try:
            line = self.answers.get(timeout=self.timeout)
        except queue.Empty:
            raise self._fail(f"gave no answer in {self.timeout:g} s to {op!r} (stopped it)") from None
        if line is None:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self.readers[1].join(timeout=2)  # the stderr reader's last lines
            last = f": {self.stderr[-1]}" if self.stderr else " with nothing on stderr"
            raise self._fail(f"exited {self.process.poll()} at {op!r}{last}")
        try:
            reply = json.loads(line)
        except ValueError:
            raise self._fail(f"broke the protocol at {op!r}: a line that is not JSON: {line.strip()[:80]!r}") from None
        if not isinstance(reply, dict) or reply.get("seq") != self.seq:
            got = reply.get("seq") if isinstance(reply, dict) else None
            raise self._fail(f"broke the protocol at {op!r}: an answer to request {got}, not to {self.seq}")
        if "error" in reply:
            raise RemoteError(reply["error"])
        if "na" in reply:
            raise NotApplicable(reply["na"])
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
        for reader in self.readers:  # at the end of the side's streams once it exited
            reader.join(timeout=2)
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
    #: seconds the side may take to answer one request (``lexkit conformance --timeout``)
    timeout: float = TIMEOUT

    def __init__(self, python: str | None = None) -> None:
        if python is not None:
            self.python = python
        self._side: Side | None = None
        self._info: dict | None = None

    def _connect(self) -> Side:
        """The side, started anew where the last one died or was stopped (each case builds afresh)."""
        if self._side is not None and not self._side.alive:
            self._side.close()
            self._side = None
        if self._side is None:
            self._side = Side(self.python, self.side, self.folders, self.env, self.timeout)
        return self._side

    def unavailable(self) -> str | None:
        where = "" if self.python == sys.executable else f" in {self.python}"
        probe = self.probe or "json"
        try:
            done = subprocess.run([self.python, "-c", f"import {probe}"], capture_output=True,
                                  text=True, errors="replace", timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return f"{self.python} did not import {probe} in {self.timeout:g} s"
        except OSError as exc:
            return f"cannot run {self.python}: {exc.strerror or exc}"
        if done.returncode:
            last = (done.stderr.strip().splitlines() or [""])[-1]
            if done.returncode != 1 or "Error" not in last:  # no traceback: not a Python, or one that exits
                said = f": {last}" if last else " with nothing on stderr"
                return f"{self.python} exited {done.returncode} when asked to import {probe}{said}"
            hint = f" (install it there: {self.install}; then --python {self.name}=ENV/bin/python)" \
                if self.install else ""
            return f"{probe} does not import{where}: {last}{hint}"
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


def elsewhere(name: str, python: str, registry=None, base: type[RemoteAdapter] = RemoteAdapter) -> RemoteAdapter:
    """lexkit's in-process adapter ``name`` run in the interpreter ``python`` (an environment with
    lexkit and another release of the runtime): :mod:`lexkit.conformance.sides.lexkit_side`. ``registry``
    and ``base``: another kind of in-process runtime (the model runtimes' registry, RemoteModelRuntime)."""
    from .adapter import ADAPTERS

    inner = (registry or ADAPTERS).get(name)
    cls = type(f"Elsewhere_{inner.__name__}", (base,), {
        "name": name, "side": "lexkit_side", "probe": "lexkit.conformance", "summary": inner.summary,
        "env": {"LEXKIT_SIDE_ADAPTER": name}, "__module__": __name__})
    return cls(python)
