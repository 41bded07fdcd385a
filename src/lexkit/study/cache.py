"""The study's cache and its log: every unit of work is stored under its key and computed once;
``DIR/log.jsonl`` records one line per task, whether it ran or was read from the cache, with
its seconds. Training runs are resumed from their last checkpoint when interrupted."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..documents.rows import Row, jsonable, typed
from ..training import batched, distributed, runs
from ..training.loop import train
from .plan import Cell, Plan

R = TypeVar("R", bound=Row)


class Cache:
    """The work of the study in ``out``: computed through the cache, trained to the last step, logged.
    ``device`` is where its models run (the rank's, set when the study starts); while
    ``gathering`` (rank 0 reading the other ranks' cells) nothing is logged as work."""

    def __init__(self, out: Path, plan: Plan, world: distributed.World, *, progress: bool) -> None:
        self.out, self.plan, self.world, self.progress = out, plan, world, progress
        self.device = plan.cfg.device
        self.gathering = False
        self.record: list[dict] = []

    def log(self, task: str, name: str, action: str, seconds: float) -> None:
        if self.gathering:
            return
        entry = {"task": task, "name": name, "action": action, "seconds": round(seconds, 2)}
        if self.world.parallel:
            entry["rank"] = self.world.rank
        self.record.append(entry)
        with open(self.out / "log.jsonl", "a") as handle:
            handle.write(json.dumps(entry) + "\n")

    def cached(self, task: str, name: str, path: Path, compute: Callable[[], Any], row: type[R]) -> Any:
        """``compute()``'s result as rows of ``row`` (one, or a list): read from ``path`` when it is
        there, else computed and stored there first. ``compute`` returns rows (handed back as they
        are) or an instrument's JSON document (stored whole, handed back as ``row``)."""
        if path.is_file():
            self.log(task, name, "cached", 0.0)
            return typed(row, json.loads(path.read_text()))
        start = time.perf_counter()
        result = compute()
        runs.write_json(path, jsonable(result))
        self.log(task, name, "ran", time.perf_counter() - start)
        is_rows = isinstance(result, Row) or (isinstance(result, list) and all(isinstance(r, Row) for r in result))
        return result if is_rows else typed(row, result)

    def trained(self, run_dir: Path, model_cfg, train_cfg, *, init: Path | None = None) -> None:
        """Train ``run_dir`` to its last step: nothing if it is done, resumed if it was
        interrupted, from scratch (or from ``init``'s weights) otherwise."""
        state = runs.trainer_state(run_dir)
        start = time.perf_counter()
        if runs.finished(state, train_cfg.steps):
            self.log("train", run_dir.name, "cached", 0.0)
            return
        resume = _clear_unwritten(run_dir)
        if self.plan.cfg.compile is not None:  # how it trains (the cell's key leaves it out)
            train_cfg = dataclasses.replace(train_cfg, compile=self.plan.cfg.compile)
        train(run_dir, model_cfg, train_cfg, resume=resume, device=self.device, progress=self.progress,
              corpus=self.plan.corpus, world=distributed.SINGLE, init=None if resume else init)
        self.log("train", run_dir.name, "ran", time.perf_counter() - start)

    def trained_together(self, run_dirs: list[Path], cells: list[Cell]) -> None:
        """Train the seeds ``cells`` (one row's, the same settings but the seed) in ``run_dirs`` as one
        batched model (:func:`lexkit.training.batched.train_seeds`): the ones not finished, resumed together
        when they stopped at the same step; each logged as ran, with ``batched`` the seeds trained
        together. Where they cannot be batched (the reason printed once), each is trained alone."""
        left = [(d, c) for d, c in zip(run_dirs, cells)
                if not runs.finished(runs.trainer_state(d), c.train_cfg.steps)]
        if len(left) < 2:  # nothing to batch
            for d, c in zip(run_dirs, cells):
                self.trained(d, c.model_cfg, c.train_cfg)
            return
        start = time.perf_counter()
        try:
            for d, _ in left:
                _clear_unwritten(d)
            batched.train_seeds([d for d, _ in left], cells[0].model_cfg, [c.train_cfg for _, c in left],
                                device=self.device, progress=self.progress, corpus=self.plan.corpus)
        except batched.BatchRefused as exc:
            if self.progress:
                print(f"{exc}: training them one by one")
            for d, c in zip(run_dirs, cells):
                self.trained(d, c.model_cfg, c.train_cfg)
            return
        seconds = (time.perf_counter() - start) / len(left)
        for d, _ in left:
            self.log("train", d.name, "ran", seconds)

    def run_dir(self, cell: Cell) -> Path:
        return self.out / "runs" / cell.name

    def finished(self, cell: Cell) -> bool:
        """Whether ``cell`` is trained to its last step and its evaluations are cached."""
        return runs.finished(runs.trainer_state(self.run_dir(cell)), cell.train_cfg.steps) and all(
            path.is_file() for path in self.plan.cache_paths(self.out, cell).values())


def _clear_unwritten(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run to resume (its config.json); a directory left by a run killed
    before its first write is emptied, so training starts it afresh."""
    if (run_dir / runs.CONFIG).is_file():
        return True
    if run_dir.exists():
        for child in run_dir.iterdir():
            child.unlink()
    return False
