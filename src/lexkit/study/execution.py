"""Running a study: every cell (this rank's share under ``torchrun``), then on rank 0 the other
ranks' cells from the shared directory, the analytic measures, each table beside the grid
(:data:`lexkit.study.tables.TABLES`), results.json and the report."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import torch

from .. import distributed, lock, provenance, runs
from ..evaluate import evaluate
from ..principles import measure_principles
from ..report import write_report
from ..resolution import analytic, analytic_curve, empirical, model_curve, resolution, texts
from ..rows import AnalyticCurves, AnalyticRow, EmpiricalRow, Evaluation, PrinciplesRow, StudyResults, StudyRun
from ..version import __version__
from .cache import Cache
from .estimate import estimate
from .plan import SCHEMA_VERSION, Cell, Plan, StudyConfig, Table
from .tables import TABLES


class Study:
    """A study in the directory ``out`` (see :mod:`lexkit.study`): what it runs (:attr:`plan`), the
    cache its work goes through (:attr:`cache`), and the tables beside its grid (:attr:`tables`, one
    :class:`~lexkit.study.plan.Table` of each of :data:`~lexkit.study.tables.TABLES`, in report
    order; :meth:`table` by key)."""

    #: seconds between looks at the cache while rank 0 waits for the other ranks' cells
    POLL = 2.0

    def __init__(self, cfg: StudyConfig, out: str | Path, *, progress: bool = True,
                 echo: Callable[[str], None] | None = print, world: distributed.World | None = None) -> None:
        self.world = world or distributed.world()
        self.cfg, self.out = cfg, Path(out)
        self.echo = echo or (lambda _msg: None)
        self.plan = Plan(cfg)
        self.cache = Cache(self.out, self.plan, self.world, progress=progress and self.world.is_main)
        self.tables: list[Table] = [table(self.plan, self.cache) for table in TABLES]

    def table(self, key: str) -> Table:
        """The table ``key`` of this study (``"extension"``, ``"retrieval"``)."""
        return next(table for table in self.tables if table.key == key)

    @property
    def record(self) -> list[dict]:
        """What this invocation did, task by task (the lines it added to ``log.jsonl``)."""
        return self.cache.record

    def estimate(self) -> dict:
        """The dry run (:func:`lexkit.study.estimate.estimate`)."""
        return estimate(self.plan, self.cache, self.tables)

    def run(self) -> StudyResults | dict:
        """Every cell (this rank's share under torchrun), then, on rank 0, results.json, the
        report and its figures (returns the results; another rank returns the names of its cells).
        One process writes a study directory at a time (its lock); under torchrun the ranks share
        it, each run directory locked by the rank training it."""
        with lock.hold(self.out) if not self.world.parallel else nullcontext():
            return self._run()

    def _run(self) -> StudyResults | dict:
        (self.out / "cache").mkdir(parents=True, exist_ok=True)
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        self.cache.device = str(distributed.rank_device(self.cfg.device, self.world))
        started = time.perf_counter()
        dtype = "bfloat16" if self.cache.device.startswith("cuda") else "float32"  # the trainer's autocast
        origin = provenance.collect(self.world, self.cache.device, dtype)
        cells = self.plan.cells()
        mine = cells[self.world.rank :: self.world.size]
        done = self.run_cells(mine, cells)
        if not self.world.is_main:
            return {"rank": self.world.rank, "cells": [cell.name for cell in mine]}
        self.wait_for([cell for cell in cells if cell.name not in done])
        self.cache.gathering = True  # the other ranks' cells: read from the cache, not logged as work
        rows = [done[cell.name] if cell.name in done else self.run_cell(cell) for cell in cells]
        self.cache.gathering = False
        doc = self.results(cells, rows, started)
        doc = dataclasses.replace(doc, provenance={**origin, "finished": provenance.now(),
                                                   "wall_seconds": round(time.perf_counter() - started, 1)})
        runs.write_json(self.out / "results.json", doc.to_json())
        write_report(doc, self.out)  # report.md, report.html, results.csv and the figures
        return doc

    def run_cells(self, mine: list[Cell], cells: list[Cell]) -> dict[str, StudyRun]:
        """This rank's cells, each trained and measured; a user error on one rank of several names it."""
        who = f"rank {self.world.rank}: " if self.world.parallel else ""
        done = {}
        for cell in mine:
            self.echo(f"{who}[{cells.index(cell) + 1}/{len(cells)}] {cell.label} (seed {cell.seed})")
            try:
                done[cell.name] = self.run_cell(cell)
            except distributed.USER_ERRORS as exc:
                if not self.world.parallel:
                    raise
                raise distributed.LocalError(f"rank {self.world.rank}: {cell.name}: {exc}") from exc
        return done

    def results(self, cells: list[Cell], rows: list[StudyRun], started: float) -> StudyResults:
        """The study's results: its settings, every cell, the analytic measures and each table."""
        plan = self.plan
        return StudyResults(
            schema=SCHEMA_VERSION, lexkit=__version__, torch=torch.__version__, config=self.cfg.to_json(),
            train_len=plan.train_len(), lengths=plan.lengths(), patterns=plan.patterns(),
            resolution_lengths=plan.resolution_lengths(),
            data={"spec": plan.corpus.spec, "fingerprint": plan.corpus.fingerprint},
            model={k: v for k, v in dataclasses.asdict(cells[0].model_cfg).items() if k != "scheme"},
            params=runs.build_model({"model": dataclasses.asdict(cells[0].model_cfg)}).num_params(),
            train={k: v for k, v in dataclasses.asdict(cells[0].train_cfg).items() if k != "seed"},
            runs=rows, analytic=self.analytic(), analytic_curves=self.analytic_curves(),
            tables={table.key: table.run() for table in self.tables},
            wall_seconds=round(time.perf_counter() - started, 1),
            work={a: sum(1 for r in self.record if r["action"] == a) for a in ("ran", "cached")})

    def wait_for(self, cells: list[Cell]) -> None:
        """Return once every cell's run is finished and its evaluations are cached (the other
        ranks' work, seen through the shared directory)."""
        pending = [cell for cell in cells if not self.cache.finished(cell)]
        if pending:
            self.echo(f"rank 0: waiting for {len(pending)} cell(s) from the other ranks")
        while pending:
            time.sleep(self.POLL)
            pending = [cell for cell in pending if not self.cache.finished(cell)]

    def run_cell(self, cell: Cell) -> StudyRun:
        """One cell trained (or found trained), then evaluated, its empirical resolution and its
        principles measured, each through the cache."""
        run_dir, cache, plan = self.cache.run_dir(cell), self.cache, self.plan
        cache.trained(run_dir, cell.model_cfg, cell.train_cfg)
        model, _ = runs.load(run_dir, device=cache.device)
        metrics = runs.read_metrics(run_dir)
        val = [r["val_bpb"] for r in metrics if "val_bpb" in r]
        lengths, patterns, paths = plan.lengths(), plan.patterns(), plan.cache_paths(self.out, cell)
        ev = cache.cached("eval", cell.name, paths["eval"], lambda: evaluate(
            model, plan.corpus.valid, lengths, patterns, max_docs=self.cfg.eval_docs, progress=cache.progress),
                          Evaluation)
        res = cache.cached("resolution", cell.name, paths["resolution"],
                           lambda: self.empirical(model, plan.resolution_lengths(), patterns), EmpiricalRow)
        principles = cache.cached("principles", cell.name, paths["principles"],
                                  lambda: measure_principles(model, plan.corpus.valid), PrinciplesRow)
        family, relative = kind_of(model)
        return StudyRun(cell.label, cell.seed, str(run_dir.relative_to(self.out)), family, relative,
                        metrics[-1]["loss"] if metrics else None, val[-1] if val else None,
                        (runs.trainer_state(run_dir) or {}).get("elapsed"), ev, res, principles)

    def empirical(self, model, lengths: list[int], patterns: list[str]) -> list[EmpiricalRow]:
        """The empirical resolution rows of ``model`` at every length that has texts, under every pattern."""
        rows = []
        for n in lengths:
            try:
                toks = texts(self.plan.corpus.valid, n, self.cfg.resolution_texts)
            except ValueError:
                continue
            for pattern in patterns:
                try:
                    row = EmpiricalRow.from_json(empirical(model, toks, pattern))
                except ValueError as exc:  # learned past its table
                    row = EmpiricalRow(n, pattern, resolution=None, note=str(exc))
                rows.append(row)
        return rows

    def analytic(self) -> list[AnalyticRow]:
        """Analytic R before training: each scheme as initialised under seed 0, at the study's
        model shape, for every pattern and resolution length (the resolution instrument's own
        :func:`~lexkit.resolution.analytic`); each layout as its model initialised under seed 0, R
        the mean over its layers of each layer's own (its scheme, its pattern under the study's,
        its temperature), each layer's kept beside it (``per_layer``)."""
        rows, shape, lengths = [], self.plan.shape(), self.plan.resolution_lengths()
        for spec in self.cfg.schemes:
            for pattern in self.plan.patterns():
                for row in analytic(spec, lengths, pattern, **shape)["results"]:
                    rows.append(AnalyticRow(spec, pattern, row["length"], row["resolution"]))
        for spec in self.cfg.layouts:
            model = initialised(self.plan.cell(self.cfg.preset, spec, 0).model_cfg)
            for pattern in self.plan.patterns():
                for length, layers in layer_values(model, lengths, pattern).items():
                    mean = None if layers is None else sum(layers) / len(layers)
                    rows.append(AnalyticRow(spec, pattern, length, mean, layers))
        return rows

    def analytic_curves(self) -> AnalyticCurves:
        """The analytic s[n] - s[0] (mean over heads, causal) of every scheme at min(4x the
        training length, the longest length): the curves the report plots (schemes only: a layout has a
        curve per layer, in its analytic rows). A scheme undefined
        at that length (``learned`` past its table) is left out."""
        n = min(4 * self.plan.train_len(), max(self.plan.lengths()))
        curves, shape = {}, self.plan.shape()
        for spec in self.cfg.schemes:
            try:
                s = analytic_curve(spec, n, **shape).mean(0)  # [n]
            except ValueError:
                continue
            curves[spec] = (s - s[0]).tolist()
        return AnalyticCurves(n, "causal", curves)


def kind_of(model) -> tuple[str, bool]:
    """A run's family and whether its scores depend on positions only through m - n: its scheme's,
    or for a model with a layout ``layout`` and whether every layer's scheme is relative."""
    if model.cfg.layout is None:
        return model.scheme.family, model.scheme.relative
    return "layout", all(scheme.relative for scheme in model.layer_schemes)


def initialised(model_cfg):
    """A model of ``model_cfg`` initialised under seed 0, the random state of the process untouched."""
    from ..model import GPT

    with torch.random.fork_rng():
        torch.manual_seed(0)
        return GPT(model_cfg).eval()


def layer_values(model, lengths: list[int], pattern: str) -> dict[int, list[float] | None]:
    """Per length, the analytic R of each layer of a layered model (its scheme, its pattern under
    ``pattern``, its temperature: :func:`lexkit.resolution.model_curve`; mean over heads); None
    where a layer's curve is undefined."""
    out: dict[int, list[float] | None] = {}
    for n in lengths:
        try:
            out[n] = [float(resolution(model_curve(model, n, pattern, layer=i)).mean())
                      for i in range(model.cfg.n_layers)]
        except ValueError:
            out[n] = None
    return out


def layer_mean(model, lengths: list[int], pattern: str) -> dict[int, float | None]:
    """Per length, the mean over a layered model's layers of :func:`layer_values`."""
    return {n: None if layers is None else sum(layers) / len(layers)
            for n, layers in layer_values(model, lengths, pattern).items()}
