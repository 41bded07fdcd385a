"""A sweep: a study of table G alone, its rows the sweep's arms (:class:`SweepTable`), each trained on
every seed with the sweep's recipe and scored as table G scores (copy needles in the trained and the
held-out formats, every multiple and depth, bpb at 1x and 16x), and besides on the sweep's tasks
(``kvthread``, ``ordinal``: the same grid, where their documents fit). Its units run through the
study's cache over the study's workers (:class:`Sweep` is a :class:`~lexkit.study.Study`), so a
sweep resumes, shares its runs with nothing else, and re-renders its report from the cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ... import tasks
from ...core import lock
from ...data.mix import parse_mix
from ...instruments.retrieval.context import context_rows
from ...instruments.retrieval.grid import minimum_length
from ...instruments.subject import RunSubject, load
from ...training import distributed, runs
from ...training.settings import inert_modifier
from ...training.stopping import probe_keys
from ..cache import Cache
from ..execution import Study
from ..plan import Plan, StudyConfig, digest
from ..tables.retrieval.rows import TRAINED, FormatScores, RetrievalEntry
from ..tables.retrieval.table import DEPTHS, MULTIPLES, Configuration, RetrievalTable, RowSpec, SeedRun
from ..units import Unit, check, whole_or_none
from . import report
from .config import SweepConfig

#: bump when the meaning of a cached task score changes (2: each cell's guessing baseline and how often the answer
#: is some candidate)
VERSION = 2


class SweepTable(RetrievalTable):
    """Table G with the sweep's arms for rows and the sweep's recipe for every run."""

    row_name = "arm"

    def __init__(self, plan: Plan, cache: Cache, sweep: SweepConfig) -> None:
        super().__init__(plan, cache)
        self.sweep = sweep

    def recipe(self):
        return self.sweep.recipe()

    def every_row(self) -> list[RowSpec]:
        """One row per arm; an arm's own mix (``""`` too: no mix) in place of the sweep's."""
        return [RowSpec(arm.label, arm.scheme, arm.layout,
                        dict(arm.train) | ({"mix": arm.mix} if arm.mix is not None else {}), arm.steps, arm.patterns)
                for arm in self.sweep.arms]

    def seed_runs(self) -> list[SeedRun]:
        """Table G's runs of the arms; an arm with a modifier that does nothing at the training length
        and at the longest multiple scored (:func:`lexkit.training.settings.inert_modifier`: ``+topk:1000000000``)
        is refused before any work, naming the arm: it would train the arm without it."""
        out = super().seed_runs()
        for run in out:
            cfg = run.cell.model_cfg
            inert = inert_modifier(cfg, max(MULTIPLES) * cfg.train_len)
            if inert is not None:
                raise ValueError(f"{self.row_name} {run.row.label!r}: {inert}")
        return out


def study_config(sweep: SweepConfig, device: str = "auto", threads: int | None = None,
                 batch_seeds: bool = False, compile: bool | None = None) -> StudyConfig:
    """The study a sweep is: table G alone (no table E, so no methods), its seeds, needles, patterns,
    corpus and the documents of its paired bpb (the grid's one scheme is never trained: a sweep has no
    grid); ``batch_seeds``: each arm's seeds trained as one batched model (:mod:`lexkit.training.batched`);
    ``compile``: every run's step compiled (None: the device's default, :mod:`lexkit.training.compiled`)."""
    return StudyConfig(preset=sweep.preset, schemes=["none"], layouts=[], patterns=list(sweep.patterns),
                       data=sweep.data, device=device, threads=threads, compile=compile, extension=False,
                       retrieval_seeds=sweep.seeds, retrieval_first_seed=sweep.first_seed,
                       retrieval_samples=sweep.samples, retrieval_docs=sweep.eval_docs,
                       retrieval_methods=False, retrieval_batch_seeds=batch_seeds)


class Sweep(Study):
    """A sweep in the directory ``out``: :class:`SweepTable`'s units (each arm's runs and their copy
    scoring) and one scoring per run and task, run like a study's (``jobs`` workers), then the
    sweep's table, JSON and figure (:mod:`.report`) from the cache."""

    name = "sweep"

    def __init__(self, sweep: SweepConfig, out: str | Path, *, progress: bool = True, echo=print, jobs: int = 1,
                 device: str = "auto", threads: int | None = None, batch_seeds: bool = False,
                 compile: bool | None = None) -> None:
        if distributed.world().parallel:
            raise ValueError("lexkit sweep shares its runs out over --jobs worker processes on one machine, not over "
                             "torchrun's ranks: run it without torchrun")
        super().__init__(study_config(sweep, device, threads, batch_seeds, compile), out, progress=progress, echo=echo,
                         world=distributed.SINGLE, jobs=jobs)
        self.sweep = sweep
        self.tables = [SweepTable(self.plan, self.cache, sweep)]

    @property
    def g(self) -> SweepTable:
        return self.tables[0]

    def build(self):
        from ..workers import Build

        return Build(Sweep, (self.sweep, self.out), {"progress": False, "echo": None, "device": self.cfg.device,
                                                      "threads": self.cfg.threads,
                                                      "batch_seeds": self.g.settings.batch_seeds,
                                                      "compile": self.cfg.compile})

    def seed_runs(self) -> list[SeedRun]:
        """Every arm on every seed (an arm that cannot train names itself)."""
        return self.g.seed_runs()

    def units(self) -> list[Unit]:
        """Each run's training and copy scoring (table G's units), then each run's scoring on each task."""
        out = self.g.units()
        for run in self.seed_runs():
            for task in self.sweep.tasks:
                out.append(Unit(f"task {run.cell.name} {task}", "task", f"{run.row.label} {task}", "sweep",
                                lambda r=run, t=task: self.task_entries(r, t),
                                lambda timer, r=run, t=task: self.task_cost(timer, r, t), (f"train {run.cell.name}",),
                                lambda r=run, t=task: self.task_path(r, t).is_file(), {"seed": run.cell.seed}))
        return check(out)

    # -- the tasks -------------------------------------------------------------------------------------
    def configuration(self, run: SeedRun) -> Configuration:
        return self.g.configurations(run)[0]

    def task_path(self, run: SeedRun, task: str) -> Path:
        """Where one run's scores on ``task`` are cached: its run, the task's documents, the grid."""
        what = {"run": run.cell.key, "task": tasks.canonical(task), "documents": tasks.identity(task),
                "patterns": self.configuration(run).patterns, "multiples": MULTIPLES, "depths": DEPTHS,
                "samples": self.sweep.samples, "v": VERSION}
        return self.out / "cache" / f"task-{digest(what)}.json"

    def task_entries(self, run: SeedRun, task: str) -> list[RetrievalEntry]:
        """One run scored on ``task`` (cached), one entry per pattern, as table G's entries (the task
        in the ``format`` field)."""
        run_dir = self.cache.run_dir(run.cell)
        configuration = self.configuration(run)
        scores = self.cache.cached("task", f"{run.cell.name} {task}", self.task_path(run, task),
                                   lambda: self.task_scores(load(run_dir, device=self.cache.device), configuration,
                                                            task), FormatScores)
        return [RetrievalEntry(run.row.label, TRAINED, run.row.scheme, False, pattern,
                               str(run_dir.relative_to(self.out)), [r for r in scores.rows if r.pattern == pattern],
                               [c for c in scores.cells if c.pattern == pattern], run.cell.seed,
                               tasks.canonical(task), False, run.row.describe())
                for pattern in dict.fromkeys(c.pattern for c in scores.cells)]

    def task_scores(self, subject, configuration: Configuration, task: str, samples: int | None = None,
                    progress: bool | None = None) -> FormatScores:
        """A subject scored on ``task`` at every multiple of the training length its documents fit
        (a ``kvthread`` document needs 51 bytes at least), every depth, under the configuration's
        patterns: exact match from the teacher-forced pass, as table G scores copy needles."""
        t = self.g.train_len()
        patterns = [subject.model.pattern(p).spec for p in configuration.patterns]
        need = minimum_length(subject, task)
        multiples = [m for m in MULTIPLES if m * t >= need]
        if not multiples:
            return FormatScores([], [])
        rows, cells = context_rows(subject, configuration.label, task=task, multiples=multiples, patterns=patterns,
                                   depths=DEPTHS, samples=samples or self.sweep.samples,
                                   documents=self.plan.corpus.valid, bpb_multiples=(), train_len=t, decode=False,
                                   progress=self.cache.progress if progress is None else progress)
        return FormatScores(rows, cells)

    def task_cost(self, timer, run: SeedRun, task: str):
        """One task's scoring timed by :meth:`task_scores` itself on a fresh model of the run, one
        needle per cell, scaled to the sweep's needles."""
        cell, configuration = run.cell, self.configuration(run)
        key = ("task", cell.model_cfg.identity(), task, configuration.patterns, self.g.train_len(), str(timer.device))
        needle = timer.measured(key, lambda: self.task_scores(RunSubject.of(timer.model(cell.model_cfg)),
                                                              configuration, task, samples=1, progress=False))
        return whole_or_none(needle * self.sweep.samples, self.task_path(run, task).is_file())

    # -- running it ------------------------------------------------------------------------------------
    def _run(self, units: list[Unit]) -> report.SweepResults:
        (self.out / "cache").mkdir(parents=True, exist_ok=True)
        self.cache.device = self.device()
        self.run_units(units)
        return self.write()

    def missing(self) -> list[Unit]:
        """The units the directory does not hold yet."""
        return [unit for unit in self.units() if not unit.done()]

    def results(self) -> report.SweepResults:
        """Everything the sweep measured, read from the cache (nothing computed: the units ran)."""
        seed_runs = self.seed_runs()
        self.cache.gathering = True
        try:
            section = self.g.run()
            extra = {task: [e for run in seed_runs for e in self.task_entries(run, task)] for task in self.sweep.tasks}
        finally:
            self.cache.gathering = False
        phases = {run.row.label: [] for run in seed_runs}
        for run in seed_runs:
            phases[run.row.label].append(phase_change(runs.read_metrics(self.cache.run_dir(run.cell)),
                                                      run.cell.train_cfg.mix))
        return report.SweepResults(self.sweep.to_json(), section, extra, phases)

    def write(self) -> report.SweepResults:
        """The sweep's table (sweep.md), its JSON (sweep.json) and its figure (sweep.png) in ``out``."""
        doc = self.results()
        report.write(doc, self.out)
        return doc

    def report_only(self) -> report.SweepResults:
        """The report re-rendered from the cache; a ValueError naming what is not there yet."""
        missing = self.missing()
        if missing:
            raise ValueError(f"--report-only: {len(missing)} unit(s) of this sweep are not in {self.out} yet (the "
                             f"first: {missing[0].label}); run it without --report-only")
        with lock.hold(self.out):
            return self.write()


def phase_change(rows: list[dict[str, Any]], mix: str, level: float = 0.5) -> int | None:
    """The step of a run's phase change: its first validation with the trained-format probe of its
    mix's first task (the copy-like one: ``induction`` in table G's and the hunt's mixes) at
    ``level`` or more (docs/retrieval.md's definition: half its needles copied); None if it never came."""
    keys = probe_keys(list(parse_mix(mix))[:1])
    for row in rows:
        if keys and all(key in row for key in keys) and all(row[key] >= level for key in keys):
            return int(row["step"])
    return None
