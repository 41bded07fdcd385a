"""The one writer of a run directory while it trains: :class:`RunDir` owns its lock, config.json, the
checkpoint, the metrics file and the provenance (``train`` holds ``RUN_DIR/.lock``, see
:mod:`lexkit.core.lock`, while it writes)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from ...core import lock
from ...core.checks import strict_json
from ...core.errors import RunError
from ...core.provenance import now
from ...model.gpt import GPT
from .config import read_config
from .files import CHECKPOINT, CONFIG, METRICS, atomic_write, read_metrics, write_json
from .weights import finished, load_checkpoint, save_checkpoint, save_weights


def check_new(out: Path) -> None:
    """``out`` can become a new run: absent, or an empty directory, in a writable place."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise RunError(f"{out} exists and is not a directory; give a new --out")
    if out.is_dir() and any(p.name != lock.LOCK for p in out.iterdir()):
        raise RunError(f"{out} exists and is not empty; use --resume to continue it, or another --out")
    parent = out if out.is_dir() else next((p for p in out.absolute().parents if p.exists()), None)
    if parent is not None and not os.access(parent, os.W_OK):
        raise RunError(f"--out {out}: {parent} is not writable")


class RunDir:
    """A run directory while one process writes it: the one owner of its lock, config.json, the
    checkpoint, the metrics file and the provenance.

    ::

        with RunDir(out, resume=False) as run:          # directory created, locked, checked again
            state = run.start(config, model, optimizer) # checkpoint loaded (resume), config.json written
            run.log({"step": 10, "loss": 3.1})          # one metrics row
            run.save(model, optimizer, state)           # checkpoint + weights, atomically
            run.finish()                                # provenance: finished, wall seconds

    Every check that needs no write happens before (:func:`check_new`, :func:`read_config`);
    ``expected`` (on resume) is the config.json the caller checked, which must still be there
    once the lock is held. On resume, metric rows past the checkpoint are dropped (they will
    be logged again) and the provenance of earlier sessions is kept under ``"previous"``.
    """

    def __init__(self, path: str | Path, *, resume: bool = False, expected: dict | None = None) -> None:
        self.path, self.resume, self.expected = Path(path), resume, expected
        self.config: dict | None = None
        self._fd: int | None = None
        self._metrics = None
        self._began = 0.0

    # -- the lock ---------------------------------------------------------------------------
    def open(self) -> RunDir:
        """Create the directory if missing and take its lock; check it again under the lock
        (another writer may have started meanwhile)."""
        self._fd = lock.take(self.path)
        try:
            if not self.resume:
                check_new(self.path)
            elif read_config(self.path, training=True) != self.expected:
                raise RunError(f"{self.path} changed while this command started; try again")
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Close the metrics file and release the lock (idempotent)."""
        if self._metrics is not None:
            self._metrics.close()
            self._metrics = None
        if self._fd is not None:
            lock.release(self.path, self._fd)
            self._fd = None

    def __enter__(self) -> RunDir:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the files --------------------------------------------------------------------------
    @property
    def has_checkpoint(self) -> bool:
        return (self.path / CHECKPOINT).is_file()

    def start(self, config: dict, model: GPT, optimizer: torch.optim.Optimizer) -> dict:
        """The trainer state to start from: the checkpoint's (weights, optimizer and RNG state
        restored) on resume when there is one, else step 0 (``model`` as the caller built or
        loaded it). Then, unless the run is already finished, metrics are cut back to that step
        and ``config`` is written as config.json (its ``"provenance"`` following the earlier
        sessions'). Returns the trainer state."""
        self._began = time.perf_counter()
        state: dict = {"step": 0, "done": False}
        if self.resume and self.has_checkpoint:
            state = load_checkpoint(self.path, model, optimizer)
            if finished(state, config["train"]["steps"]):
                return state
        if self.resume:
            self.truncate_metrics(state["step"])
            earlier = (self.expected or {}).get("provenance")
            if earlier and "provenance" in config:
                config = {**config, "provenance": {**config["provenance"], "previous": [
                    {k: v for k, v in earlier.items() if k != "previous"}, *earlier.get("previous", [])]}}
        self.config = config
        write_json(self.path / CONFIG, config)
        self._metrics = open(self.path / METRICS, "a")
        return state

    def log(self, row: dict) -> None:
        """Append one metrics row (flushed: a reader sees it at once)."""
        self._metrics.write(strict_json(row) + "\n")
        self._metrics.flush()

    def save(self, model: GPT, optimizer: torch.optim.Optimizer, state: dict) -> None:
        """The checkpoint (weights, optimizer, RNG, ``state``) and the weights file."""
        save_checkpoint(self.path, model, optimizer, state)
        save_weights(self.path, model)

    def finish(self) -> None:
        """Record in config.json's provenance when this session ended and its wall seconds."""
        if self.config is None or "provenance" not in self.config:
            return
        self.config["provenance"] = {**self.config["provenance"], "finished": now(),
                                     "wall_seconds": round(time.perf_counter() - self._began, 3)}
        write_json(self.path / CONFIG, self.config)

    def truncate_metrics(self, step: int) -> None:
        """Drop metric rows past ``step`` (the checkpoint resumed from: they will be logged again)."""
        rows = [r for r in read_metrics(self.path) if r.get("step", 0) <= step]
        atomic_write(self.path / METRICS, "".join(strict_json(r) + "\n" for r in rows))
