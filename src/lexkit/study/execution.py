"""Running a study: every cell (this rank's share under ``torchrun``), then on rank 0 the other
ranks' cells from the shared directory, the analytic measures, tables E and G, results.json and
the report."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import torch

from .. import distributed, lock, positions, provenance, runs
from ..data import Corpus
from ..evaluate import evaluate
from ..principles import measure_principles
from ..resolution import analytic, analytic_curve, empirical, texts, to_json
from ..version import __version__
from . import retrieval as study_retrieval
from .cache import CacheLog
from .estimate import Estimate
from .extension import ExtensionTable
from .plan import SCHEMA_VERSION, Cell, Plan, StudyConfig


class Study(Plan, CacheLog, ExtensionTable, Estimate):
    """A study in the directory ``out`` (see :mod:`lexkit.study`)."""

    #: seconds between looks at the cache while rank 0 waits for the other ranks' cells
    POLL = 2.0

    def __init__(self, cfg: StudyConfig, out: str | Path, *, progress: bool = True,
                 echo: Callable[[str], None] | None = print, world: distributed.World | None = None) -> None:
        self.world = world or distributed.world()
        self.cfg, self.out, self.progress = cfg, Path(out), progress and self.world.is_main
        self.echo = echo or (lambda _msg: None)
        self.device = cfg.device
        self.gathering = False
        self._corpus: Corpus | None = None
        self.record: list[dict] = []

    def run(self) -> dict:
        """Every cell (this rank's share under torchrun), then, on rank 0, results.json, the
        report and its figures. One process writes a study directory at a time (its lock); under
        torchrun the ranks share it, each run directory locked by the rank training it."""
        with lock.hold(self.out) if not self.world.parallel else nullcontext():
            return self._run()

    def _run(self) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "cache").mkdir(exist_ok=True)
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        self.device = str(distributed.rank_device(self.cfg.device, self.world))
        started = time.perf_counter()
        dtype = "bfloat16" if self.device.startswith("cuda") else "float32"  # the trainer's autocast
        origin = provenance.collect(self.world, self.device, dtype)
        cells = self.cells()
        mine = cells[self.world.rank :: self.world.size]
        who = f"rank {self.world.rank}: " if self.world.parallel else ""
        done = {}
        for cell in mine:
            self.echo(f"{who}[{cells.index(cell) + 1}/{len(cells)}] {cell.scheme} (seed {cell.seed})")
            try:
                done[cell.name] = self.run_cell(cell)
            except distributed.USER_ERRORS as exc:
                if not self.world.parallel:
                    raise
                raise distributed.LocalError(f"rank {self.world.rank}: {cell.name}: {exc}") from exc
        if not self.world.is_main:
            return {"rank": self.world.rank, "cells": [cell.name for cell in mine]}
        self.wait_for([cell for cell in cells if cell.name not in done])
        self.gathering = True  # the other ranks' cells: read from the cache, not logged as work
        rows = [done[cell.name] if cell.name in done else self.run_cell(cell) for cell in cells]
        self.gathering = False
        analytic_rows = self.analytic()
        curves = self.analytic_curves()
        extension = self.extension()
        retrieval = study_retrieval.run(self)
        results = {
            "schema": SCHEMA_VERSION,
            "lexkit": __version__,
            "torch": torch.__version__,
            "config": dataclasses.asdict(self.cfg),
            "train_len": self.train_len(),
            "lengths": self.lengths(),
            "patterns": self.patterns(),
            "resolution_lengths": self.resolution_lengths(),
            "data": {"spec": self.corpus.spec, "fingerprint": self.corpus.fingerprint},
            "model": {k: v for k, v in dataclasses.asdict(cells[0].model_cfg).items() if k != "scheme"},
            "params": runs.build_model({"model": dataclasses.asdict(cells[0].model_cfg)}).num_params(),
            "train": {k: v for k, v in dataclasses.asdict(cells[0].train_cfg).items() if k != "seed"},
            "runs": rows,
            "analytic": analytic_rows,
            "analytic_curves": curves,
            "extension": extension,
            **({"retrieval": retrieval} if retrieval is not None else {}),
            "wall_seconds": round(time.perf_counter() - started, 1),
            "work": {a: sum(1 for r in self.record if r["action"] == a) for a in ("ran", "cached")},
            "provenance": {**origin, "finished": provenance.now(),
                           "wall_seconds": round(time.perf_counter() - started, 1)},
        }
        runs.write_json(self.out / "results.json", results)
        from ..report import write_report

        write_report(results, self.out)  # report.md, report.html, results.csv and the figures
        return results

    def wait_for(self, cells: list[Cell]) -> None:
        """Return once every cell's run is finished and its evaluations are cached (the other
        ranks' work, seen through the shared directory)."""
        pending = [cell for cell in cells if not self.finished(cell)]
        if pending:
            self.echo(f"rank 0: waiting for {len(pending)} cell(s) from the other ranks")
        while pending:
            time.sleep(self.POLL)
            pending = [cell for cell in pending if not self.finished(cell)]

    def run_cell(self, cell: Cell) -> dict:
        run_dir = self.out / "runs" / cell.name
        self.trained(run_dir, cell.model_cfg, cell.train_cfg)
        model, config = runs.load(run_dir, device=self.device)
        metrics = runs.read_metrics(run_dir)
        val = [r["val_bpb"] for r in metrics if "val_bpb" in r]
        train_seconds = (runs.trainer_state(run_dir) or {}).get("elapsed")

        lengths, patterns, paths = self.lengths(), self.patterns(), self.cache_paths(cell)
        ev = self.cached("eval", cell.name, paths["eval"], lambda: evaluate(
            model, self.corpus.valid, lengths, patterns, max_docs=self.cfg.eval_docs, progress=self.progress))
        res = self.cached("resolution", cell.name, paths["resolution"],
                           lambda: self.empirical(model, self.resolution_lengths(), patterns))
        principles = self.cached("principles", cell.name, paths["principles"],
                                  lambda: measure_principles(model, self.corpus.valid))
        return {
            "scheme": cell.scheme, "seed": cell.seed, "run": str(run_dir.relative_to(self.out)),
            "family": positions.get(cell.scheme.split(":")[0]).family,
            "relative": positions.get(cell.scheme.split(":")[0]).relative,
            "final_loss": metrics[-1]["loss"] if metrics else None, "val_bpb": val[-1] if val else None,
            "train_seconds": train_seconds,
            "eval": {"results": ev["results"], "by_position": ev["by_position"], "documents": ev["documents"],
                     "bytes_per_document": ev["bytes_per_document"]},
            "resolution": res,
            "principles": principles,
        }

    def empirical(self, model, lengths: list[int], patterns: list[str]) -> list[dict]:
        rows = []
        for n in lengths:
            try:
                toks = texts(self.corpus.valid, n, self.cfg.resolution_texts)
            except ValueError:
                continue
            for pattern in patterns:
                try:
                    row = to_json(empirical(model, toks, pattern))
                except ValueError as exc:  # learned past its table
                    row = {"length": n, "pattern": pattern, "resolution": None, "note": str(exc)}
                rows.append(row)
        return rows

    def analytic(self) -> list[dict]:
        """Analytic R before training: each scheme as initialised under seed 0, at the study's
        model shape, for every pattern and resolution length (the resolution instrument's own
        :func:`~lexkit.resolution.analytic`)."""
        rows, shape, lengths = [], self.shape(), self.resolution_lengths()
        for spec in self.cfg.schemes:
            for pattern in self.patterns():
                for row in analytic(spec, lengths, pattern, **shape)["results"]:
                    rows.append({"scheme": spec, "pattern": pattern, "length": row["length"],
                                 "resolution": row["resolution"]})
        return rows

    def analytic_curves(self) -> dict:
        """The analytic s[n] - s[0] (mean over heads, causal) of every scheme at min(4x the
        training length, the longest length): the curves the report plots. A scheme undefined
        at that length (``learned`` past its table) is left out."""
        n = min(4 * self.train_len(), max(self.lengths()))
        curves, shape = {}, self.shape()
        for spec in self.cfg.schemes:
            try:
                s = analytic_curve(spec, n, **shape).mean(0)  # [n]
            except ValueError:
                continue
            curves[spec] = (s - s[0]).tolist()
        return {"length": n, "pattern": "causal", "curves": curves}
