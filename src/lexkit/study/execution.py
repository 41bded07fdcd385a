"""Running a study: its units of work (each cell of the grid, each table's runs and scorings) in one
process or over worker processes (:mod:`lexkit.study.workers`), or this rank's share under
``torchrun``; then on rank 0, every result read back from the cache, the analytic measures, each
table beside the grid (:data:`lexkit.study.tables.TABLES`), results.json and the report."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import torch

from ..core import checks, lock, provenance, threads
from ..core.device import training_dtype
from ..core.version import __version__
from ..instruments.evaluate.measure import evaluate
from ..instruments.evaluate.rows import Evaluation
from ..instruments.principles import measure_principles
from ..instruments.principles.rows import PrinciplesRow
from ..instruments.resolution.analytic import analytic
from ..instruments.resolution.curves import analytic_curve, model_curve
from ..instruments.resolution.empirical import empirical, texts
from ..instruments.resolution.formula import resolution
from ..instruments.resolution.rows import AnalyticCurves, AnalyticRow, EmpiricalRow
from ..training import distributed, runs
from . import workers
from .cache import Cache
from .estimate import Load, Timer, estimate
from .plan import SCHEMA_VERSION, Cell, Plan, StudyConfig, StudyTable, cell_unit
from .report import write_report
from .schema import StudyResults, StudyRun
from .tables import TABLES
from .units import GRID, Cost, Unit, check, training

#: the most worker processes a study runs
MAX_JOBS = 1024


class Study:
    """A study in the directory ``out`` (see :mod:`lexkit.study`): what it runs (:attr:`plan`), the
    cache its work goes through (:attr:`cache`), and the tables beside its grid (:attr:`tables`, one
    :class:`~lexkit.study.plan.StudyTable` of each of :data:`~lexkit.study.tables.TABLES`, in report
    order; :meth:`table` by key). Its work is :meth:`units`, run in this process (``jobs`` 1) or
    over ``jobs`` worker processes (:mod:`lexkit.study.workers`), or shared out over torchrun's ranks."""

    #: seconds between looks at the cache while a rank waits for another rank's units
    POLL = 2.0
    #: what the progress bar calls it
    name = "study"

    def __init__(self, cfg: StudyConfig, out: str | Path, *, progress: bool = True,
                 echo: Callable[[str], None] | None = print, world: distributed.World | None = None,
                 jobs: int = 1) -> None:
        self.world = world or distributed.world()
        self.cfg, self.out = cfg, Path(out)
        self.echo = echo or (lambda _msg: None)
        self.jobs = checks.number("jobs", jobs, maximum=MAX_JOBS)
        if jobs > 1 and self.world.parallel:
            raise ValueError(f"--jobs {jobs} runs worker processes, and under torchrun the ranks are the workers: "
                             "leave out --jobs (or give 1)")
        self.progress = progress and self.world.is_main
        self.plan = Plan(cfg, self.out / "runs")
        self.cache = Cache(self.out, self.plan, self.world, progress=self.progress)
        self.tables: list[StudyTable] = [table(self.plan, self.cache) for table in TABLES]

    def table(self, key: str) -> StudyTable:
        """The table ``key`` of this study (``"extension"``, ``"retrieval"``)."""
        return next(table for table in self.tables if table.key == key)

    @property
    def record(self) -> list[dict]:
        """What this invocation did, task by task (the lines it added to ``log.jsonl``)."""
        return self.cache.record

    # -- its work --------------------------------------------------------------------------------------
    def units(self) -> list[Unit]:
        """Every unit of the study's work, in an order one process can follow: each cell of the grid
        (trained, then evaluated, its resolution and principles measured), then each table's
        (:meth:`~lexkit.study.plan.Section`: its own units, or the whole table after the grid)."""
        cells = self.plan.cells()
        out = [Unit(cell_unit(cell), "cell", f"{cell.label} (seed {cell.seed})", GRID,
                    lambda c=cell: self.run_cell(c), lambda timer, c=cell: self.cell_cost(timer, c),
                    done=lambda c=cell: self.cache.finished(c),
                    info={"seed": cell.seed, "run": cell.name, "row": cell.label, "steps": cell.train_cfg.steps})
               for cell in cells]
        for table in self.tables:
            if hasattr(table, "units"):
                out += table.units()
            elif getattr(table.settings, "on", True):
                out.append(self.table_unit(table, cells))
        return check(out)

    def cell_cost(self, timer: Timer, cell: Cell) -> Cost:
        """A cell's training (from its checkpoint on) and its measures, each timed by what it runs:
        the trainer's step, :func:`~lexkit.evaluate.evaluate` on one document, the empirical
        resolution on one text per length, the principles (none left when cached)."""
        plan, model_cfg = self.plan, cell.model_cfg
        train = training(timer.step(model_cfg, cell.train_cfg), cell.train_cfg.steps,
                         runs.trainer_state(self.cache.run_dir(cell)))
        lengths, patterns, valid = plan.lengths(), plan.patterns(), plan.corpus.valid
        measures = timer.evaluation(model_cfg, valid, lengths, patterns) * plan.eval_documents()
        res = plan.resolution_lengths()
        measures += timer.measured(("resolution", model_cfg.identity(), res, patterns, str(timer.device)),
                                   lambda: self.empirical(timer.model(model_cfg), res, patterns, count=1)
                                   ) * self.cfg.resolution_texts
        measures += timer.measured(("principles", model_cfg.identity(), str(timer.device)),
                                   lambda: measure_principles(timer.model(model_cfg), valid))
        cached = all(path.is_file() for path in plan.cache_paths(self.out, cell).values())
        return Cost(train.seconds + measures, train.left + (0.0 if cached else measures),
                    parts={**train.parts, "eval_s": measures})

    def table_unit(self, table: StudyTable, cells: list[Cell]) -> Unit:
        """A table without units of its own as one: its :meth:`run` after every cell of the grid,
        timed by its ``tasks()``, on the grid's measured times."""
        def cost(timer: Timer) -> Cost:
            grid = {}
            for cell in cells:
                if cell.label not in grid:
                    parts = self.cell_cost(timer, cell).parts
                    grid[cell.label] = {"train_s": parts["train_s"], "eval_s": parts["eval_s"]}
            tasks = table.tasks(grid, timer.device) if hasattr(table, "tasks") else []
            seconds = sum(task["seconds"] for task in tasks)
            return Cost(seconds, seconds, tasks=tasks)

        return Unit(f"table {table.key}", "table", f"table {table.key}", table.key, table.run, cost,
                    tuple(cell_unit(cell) for cell in cells))

    def estimate(self, jobs: int | None = None, timer: Timer | None = None) -> dict:
        """The dry run: every unit timed on this machine at the threads each worker runs at (by
        ``timer``, default a fresh :class:`~lexkit.study.estimate.Timer` that keeps its measurements
        in :meth:`timings` for the run's progress bar), and scheduled over ``jobs`` workers
        (default: the study's) (:func:`lexkit.study.estimate.estimate`)."""
        jobs = jobs or self.jobs
        probe = None if timer is not None or not self.device().startswith("cpu") else threads.Probe()
        timer = timer or Timer(self.device(), self.worker_threads(jobs), store=self.timings(), fresh=True)
        # what the rest of the machine did while the units were timed: the workers will share it
        load = None if probe is None else (lambda: Load(probe.busy(), threads.cores()))
        estimated = estimate(self.units(), timer, jobs, load)
        estimated.update(lengths=self.plan.lengths(), patterns=self.plan.patterns(),
                         eval_docs=self.plan.eval_documents())
        return estimated

    def timings(self) -> Path:
        """Where the estimate's measurements are kept (the dry run's, reused by the run's bar)."""
        return self.out / "cache" / "timings.json"

    def worker_threads(self, jobs: int | None = None) -> int | None:
        """The torch threads each worker runs at: ``threads`` when given, else one over workers (as
        the process is for a study in one process)."""
        return self.cfg.threads or (1 if (jobs or self.jobs) > 1 else None)

    def device(self) -> str:
        return str(distributed.rank_device(self.cfg.device, self.world))

    def devices(self) -> list[str]:
        """The workers' devices: each CUDA device in turn on a GPU machine, else the CPU."""
        device = self.device()
        if device.startswith("cuda") and not self.world.parallel:
            return [f"cuda:{i}" for i in range(max(1, torch.cuda.device_count()))]
        return [device]

    # -- running it ------------------------------------------------------------------------------------
    def run(self) -> StudyResults | dict:
        """Every unit (this rank's share under torchrun), then, on rank 0, results.json, the
        report and its figures (returns the results; another rank returns the names of its units).
        One process writes a study directory at a time (its lock); under torchrun the ranks share
        it, each run directory locked by the rank training it."""
        units = self.units()  # the settings checked before the directory is touched
        with lock.hold(self.out) if not self.world.parallel else nullcontext():
            return self._run(units)

    def _run(self, units: list[Unit]) -> StudyResults | dict:
        (self.out / "cache").mkdir(parents=True, exist_ok=True)
        if self.cfg.threads:
            threads.use(self.cfg.threads, "threads")
        self.cache.device = self.device()
        started = time.perf_counter()
        origin = provenance.collect(self.world, self.cache.device, training_dtype(self.cache.device))
        if self.world.parallel:
            mine = self.run_share(units)
            if not self.world.is_main:
                return {"rank": self.world.rank, "units": [unit.name for unit in mine]}
            self.wait_for([unit for unit in units if unit.job != "table"])
        else:
            self.run_units(units)
        cells = self.plan.cells()
        self.cache.gathering = True  # everything is cached now: read back, not logged as work
        try:
            rows = [self.run_cell(cell) for cell in cells]
            doc = self.results(cells, rows, started)
        finally:
            self.cache.gathering = False
        doc = dataclasses.replace(doc, provenance={**origin, "finished": provenance.now(),
                                                   "wall_seconds": round(time.perf_counter() - started, 1)})
        doc = dataclasses.replace(doc, invocations=invocations(self.out / "results.json", doc))
        runs.write_json(self.out / "results.json", doc.to_json())
        write_report(doc, self.out)  # report.md, report.html, results.csv and the figures
        return doc

    def run_units(self, units: list[Unit]) -> None:
        """Every unit, in this process or over the study's workers (:func:`lexkit.study.workers.run`),
        behind one progress bar for the whole study when progress is on (timed first: the ETA)."""
        seconds = None
        if self.progress:  # the bar's ETA, and the workers' order (longest chain first; else by count)
            timer = Timer(self.cache.device, self.worker_threads(), store=self.timings())
            seconds = {unit.name: 0.0 if unit.done() else unit.cost(timer).left for unit in units}
        inner, self.cache.progress = self.cache.progress, False  # one bar: the study's
        try:
            workers.run(units, jobs=self.jobs, build=self.build(), devices=self.devices(),
                        threads=self.worker_threads() or 1, cache=self.cache, progress=self.progress,
                        estimate=None if seconds is None else (lambda unit: seconds[unit.name]), echo=self.echo,
                        name=self.name)
        finally:
            self.cache.progress = inner

    def build(self) -> workers.Build:
        """How a worker builds this study's units: the study itself, quiet, in one process."""
        return workers.Build(Study, (self.cfg, self.out), {"progress": False, "echo": None,
                                                          "world": distributed.SINGLE}, tuple(TABLES))

    def run_share(self, units: list[Unit]) -> list[Unit]:
        """Under torchrun: this rank's share of the units (every N-th, a table without units of its
        own left to rank 0's report), each once what it needs is done (another rank's work, seen
        through the shared directory); a user error names the rank and the unit's run."""
        shared = [unit for unit in units if unit.job != "table"]
        mine = shared[self.world.rank :: self.world.size]
        by_name = {unit.name: unit for unit in units}
        who = f"rank {self.world.rank}: "
        for i, unit in enumerate(mine):
            self.wait_for([by_name[name] for name in unit.needs], quiet=True)
            self.echo(f"{who}[{i + 1}/{len(mine)}] {unit.label}")
            try:
                unit.work()
            except distributed.USER_ERRORS as exc:
                raise distributed.LocalError(f"{who}{unit.info.get('run', unit.label)}: {exc}") from exc
        return mine

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
            train={k: v for k, v in cells[0].train_cfg.recorded().items() if k != "seed"},
            runs=rows, analytic=self.analytic(), analytic_curves=self.analytic_curves(),
            tables={table.key: table.run() for table in self.tables},
            wall_seconds=round(time.perf_counter() - started, 1),
            work={a: sum(1 for r in self.record if r["action"] == a) for a in ("ran", "cached")})

    def wait_for(self, units: list[Unit], *, quiet: bool = False) -> None:
        """Return once every unit is done (another rank's work, seen through the shared directory)."""
        pending = [unit for unit in units if not unit.done()]
        if pending and not quiet:
            self.echo(f"rank {self.world.rank}: waiting for {len(pending)} unit(s) from the other ranks")
        while pending:
            time.sleep(self.POLL)
            pending = [unit for unit in pending if not unit.done()]

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
        family, layered, relative = scheme_family(model)
        return StudyRun(cell.label, cell.seed, str(run_dir.relative_to(self.out)), family, layered, relative,
                        metrics[-1]["loss"] if metrics else None, val[-1] if val else None,
                        (runs.trainer_state(run_dir) or {}).get("elapsed"), ev, res, principles)

    def empirical(self, model, lengths: list[int], patterns: list[str],
                  count: int | None = None) -> list[EmpiricalRow]:
        """The empirical resolution rows of ``model`` at every length that has texts (``count`` of
        them, default ``resolution_texts``), under every pattern."""
        rows = []
        for n in lengths:
            try:
                toks = texts(self.plan.corpus.valid, n, count or self.cfg.resolution_texts)
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
                    rows.append(AnalyticRow(spec, pattern, length, _mean(layers), layers))
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


def scheme_family(model) -> tuple[str | None, bool, bool]:
    """A run's family, whether it is layered (a model with a layout) and whether its scores depend on
    positions only through m - n: its scheme's family and relativity, or for a layout the family its
    every layer's scheme shares (None where they differ) and whether every layer's scheme is relative
    (:class:`~lexkit.study.schema.StudyRun`)."""
    if model.cfg.layout is None:
        return model.scheme.family, False, model.scheme.relative
    families = {scheme.family for scheme in model.layer_schemes}
    return (families.pop() if len(families) == 1 else None), True, all(s.relative for s in model.layer_schemes)


def initialised(model_cfg):
    """A model of ``model_cfg`` initialised under seed 0, the random state of the process untouched."""
    from ..model.gpt import GPT

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
    """Per length, the mean over a layered model's layers of :func:`layer_values` (a layout's analytic R)."""
    return {n: _mean(layers) for n, layers in layer_values(model, lengths, pattern).items()}


def _mean(layers: list[float] | None) -> float | None:
    return None if layers is None else sum(layers) / len(layers)


def invocations(path: Path, doc: StudyResults) -> list[dict]:
    """``doc``'s invocation after those the study's ``path`` (results.json) records of the same
    configuration (a results.json from before this list: its own invocation, as its figures say;
    another configuration's, or a file that cannot be read: none)."""
    this = {"finished": (doc.provenance or {}).get("finished"), "wall_seconds": doc.wall_seconds,
            **(doc.work or {})}
    try:
        before = json.loads(path.read_text())
    except (OSError, ValueError):
        return [this]
    if not isinstance(before, dict) or before.get("config") != doc.config:
        return [this]
    earlier = before.get("invocations")
    if not isinstance(earlier, list):
        earlier = [{"finished": (before.get("provenance") or {}).get("finished"),
                    "wall_seconds": before.get("wall_seconds"), **(before.get("work") or {})}]
    return [entry for entry in earlier if isinstance(entry, dict)] + [this]

