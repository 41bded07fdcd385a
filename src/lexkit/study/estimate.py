"""The study's time estimate (``lexkit study --dry-run``, and the ETA of its progress bar): each unit of
work (:mod:`lexkit.study.units`) timed by running what it runs, briefly, on this machine, and the units
scheduled over the study's workers (:mod:`lexkit.study.schedule`).

"Time what runs": a training unit is timed by the trainer's own step on its model at its batch, the
batch drawn as the trainer draws it (with a retrieval mix: its task documents written)
(:func:`timed_steps`), counted for the steps its checkpoint has left; an evaluation by
:func:`lexkit.evaluate.evaluate` itself on one document, under the configuration's own scheme,
log-n and patterns (a ReRoPE evaluation times ReRoPE's scores path, not the plain forward), scaled by
the documents; a scoring of table G by the table's own scoring on one needle per cell. Each
measurement is made once per model and setting (:class:`Timer`), on a freshly initialised model (the
random state of the process untouched), at the thread count each worker will run at. The wall time
is the schedule's makespan over the workers, dependencies included, not the sum over them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from ..core.device import resolve_device
from ..data.corpus import Stream
from ..data.mix import MixedStream
from ..instruments.evaluate.measure import evaluate
from ..model.gpt import GPT
from ..training.loop import device_autocast, make_optimizer, train_step
from ..training.runs import atomic_write
from .plan import digest
from .schedule import Task, levels, schedule
from .units import Unit


class Timer:
    """Measurements on this machine, each made once: :meth:`measured` (any function, by key),
    :meth:`step` (one training step) and :meth:`evaluation` (one document evaluated), on ``device``
    at ``threads`` torch threads (None: as the process runs). With a ``store`` (a JSON file), every
    measurement is written there as it is made, and those already there are reused unless
    ``fresh``: a study reuses what its dry run measured (the dry run measures anew)."""

    def __init__(self, device: str | torch.device = "cpu", threads: int | None = None, *,
                 store: Path | None = None, fresh: bool = False) -> None:
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.threads = threads
        self.store = store
        self.seen: dict[str, float] = {}
        if store is not None and not fresh and store.is_file():
            with contextlib.suppress(ValueError, OSError):
                self.seen = {k: float(v) for k, v in json.loads(store.read_text()).items()}

    def _keep(self, name: str, seconds: float) -> float:
        self.seen[name] = seconds
        if self.store is not None:
            with contextlib.suppress(OSError):
                self.store.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(self.store, json.dumps(self.seen, indent=0, sort_keys=True))
        return seconds

    @contextlib.contextmanager
    def _threads(self) -> Iterator[None]:
        before = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(self.threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def measured(self, key: Any, run: Callable[[], Any]) -> float:
        """The seconds ``run()`` takes, measured the first time ``key`` is asked for (the process's
        random state and thread count as they were)."""
        name = digest([key, self.threads])
        if name not in self.seen:
            with torch.random.fork_rng(devices=[]), self._threads():
                start = time.perf_counter()
                run()
                self._keep(name, time.perf_counter() - start)
        return self.seen[name]

    def model(self, model_cfg) -> GPT:
        """A model of ``model_cfg`` initialised under seed 0, on the timer's device, in eval mode."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return GPT(model_cfg).to(self.device).eval()

    def step(self, model_cfg, train_cfg) -> float:
        """Seconds of one training step of ``model_cfg`` at ``train_cfg``'s batch (:func:`timed_steps`)."""
        name = digest([("step", model_cfg.identity(), train_cfg.batch, train_cfg.mix, str(self.device)), self.threads])
        if name not in self.seen:
            with torch.random.fork_rng(devices=[]), self._threads():
                self._keep(name, timed_steps(model_cfg, train_cfg, self.device))
        return self.seen[name]

    def evaluation(self, model_cfg, documents, lengths: list[int], patterns: list[str],
                   train_len: int | None = None) -> float:
        """Seconds :func:`lexkit.evaluate.evaluate` takes for one document of ``documents`` at
        ``lengths`` under ``patterns`` (it scores the same bytes per document, so a study's
        evaluation costs this times its documents)."""
        key = ("evaluate", model_cfg.identity(), lengths, patterns, train_len, str(self.device))
        return self.measured(key, lambda: evaluate(self.model(model_cfg), documents, lengths, patterns, max_docs=1,
                                                   train_len=train_len))


def timed_steps(model_cfg, train_cfg, device) -> float:
    """Seconds of one training step as the trainer takes it: its batch drawn from a stream as the
    trainer's is (:func:`timing_stream`: with a retrieval mix, its task documents written, which at
    table G's recipe is about a tenth of the step on a CPU), then its own
    :func:`~lexkit.training.loop.train_step` on a fresh model of ``model_cfg`` (seed 0) at ``train_cfg``'s
    batch: 6 steps, the first a warm-up, the median of the other five (one step of a busy machine's
    noise does not move it)."""
    torch.manual_seed(0)
    model = GPT(model_cfg).to(device)
    stream = timing_stream(train_cfg.mix, model_cfg.train_len)
    optimizer = make_optimizer(model, train_cfg)
    times = []
    for step in range(6):
        start = time.perf_counter()
        x, y = stream.batch(step, train_cfg.batch, model_cfg.train_len, train_cfg.seed)
        train_step(model, optimizer, x.to(device), y.to(device), grad_clip=train_cfg.grad_clip,
                   autocast=device_autocast(device))
        times.append(time.perf_counter() - start)
    return sorted(times[1:])[2]


def timing_stream(mix: str, length: int) -> Stream:
    """A training stream of random bytes (seed 0) that draws batches as a run's does: windows, and
    with ``mix`` its task documents in their share of the rows (:class:`lexkit.data.mix.MixedStream`),
    their haystack from the stream itself."""
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 256, (max(1 << 16, 8 * (length + 1)),), generator=gen).to(torch.int16)
    return MixedStream(tokens, mix) if mix else Stream(tokens=tokens)


@dataclasses.dataclass(frozen=True)
class Load:
    """What the machine was doing while the dry run timed its units, one at a time: other processes
    kept ``busy`` of its ``cores`` busy (:class:`lexkit.core.threads.Probe`; None: unknown). A snapshot: a
    job that starts or ends later changes what the run takes."""

    busy: float | None
    cores: int

    def factor(self, jobs: int, threads: int | None) -> float:
        """How much longer a unit takes in the run than it took timed alone: timed, it and the other
        processes shared the cores; in the run ``jobs`` workers of ``threads`` threads each (None: all
        cores) share them with the same others. A core's share is min(1, cores / demand), so the
        factor is max(1, (busy + jobs·threads) / cores) / max(1, (busy + threads) / cores): 1 for one
        process or on idle cores, 4/3 for two one-thread workers on 2 cores that others keep busy
        (4/2 over 3/2), 3/2 for two on 2 cores with one core busy (3/2 over 1)."""
        if jobs <= 1 or self.busy is None:
            return 1.0
        each = threads or self.cores
        return max(1.0, (self.busy + jobs * each) / self.cores) / max(1.0, (self.busy + each) / self.cores)


def estimate(units: list[Unit], timer: Timer, jobs: int, load: Load | Callable[[], Load] | None = None) -> dict:
    """Every unit timed (``units``: name, kind, label, table, info, ``seconds`` for the whole unit,
    ``left`` for what the study directory does not hold yet, ``least`` where a stop rule may end it
    sooner), and the schedule over ``jobs`` workers: ``total_s`` (the whole study's wall time),
    ``left_s`` (what is left of it), ``least_s`` (what is left if every run with a stop rule stops at
    its earliest), ``task_s`` (the sum of the units' seconds) and ``critical_s`` (its longest chain).
    With the ``load`` the units were timed under (or a function that reads it once they are timed),
    each unit's seconds are scaled by :meth:`Load.factor` at the timer's threads (the workers share the
    cores; ``load`` and ``factor`` in the result)."""
    costs = [(unit, unit.cost(timer)) for unit in units]
    if callable(load):
        load = load()
    factor = 1.0 if load is None else load.factor(jobs, timer.threads)
    rows = []
    for unit, cost in costs:
        least = cost.left if cost.least is None else min(cost.left, cost.least)
        rows.append({"name": unit.name, "job": unit.job, "label": unit.label, "table": unit.table,
                     "needs": list(unit.needs), **unit.info, "seconds": cost.seconds * factor,
                     "left": cost.left * factor, "least": least * factor,
                     **{k: v * factor if k.endswith("_s") else v for k, v in cost.parts.items()},
                     **({"tasks": cost.tasks} if cost.tasks else {})})

    def makespan(field: str) -> float:
        return schedule([Task(r["name"], r[field], tuple(r["needs"])) for r in rows], jobs).makespan

    whole = [Task(r["name"], r["seconds"], tuple(r["needs"])) for r in rows]
    return {"units": rows, "jobs": jobs, "total_s": makespan("seconds"), "left_s": makespan("left"),
            "least_s": makespan("least"), "task_s": sum(r["seconds"] for r in rows),
            "critical_s": max(levels(whole).values(), default=0.0), "factor": factor,
            "load": None if load is None else dataclasses.asdict(load)}


def load_line(estimate: dict) -> str:
    """What the dry run says of the load its estimate was measured under."""
    load = estimate.get("load")
    if load is None:
        return ""
    busy = "an unknown load" if load["busy"] is None else \
        f"other processes keeping {load['busy']:.1f} of the {load['cores']} cores busy"
    jobs = estimate["jobs"]
    scaled = (f"; {jobs} workers share the cores with them, so each unit is put at {estimate['factor']:.2f}x its time "
              "alone" if round(estimate["factor"], 2) > 1 else "")  # said only where it reads more than 1.00x
    return (f"timed just now, one unit at a time, with {busy}: a snapshot of this machine's load (a job that "
            f"starts or ends changes it){scaled}")
