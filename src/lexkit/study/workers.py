"""Running a study's units of work (:mod:`lexkit.study.units`): in this process one after another, or
over N worker processes, each unit once its needs are done, the longest chain first.

Workers are spawned processes (``multiprocessing``'s ``spawn``: a fresh interpreter, no state of the
parent's), each on one device at a fixed number of torch threads (one on the CPU: two one-thread
jobs on two cores run at about twice the rate of one two-thread job, docs/threads.md). Each builds
the study's units itself from the study's configuration (:class:`Build`) and runs those the parent
sends by name, through the study's cache: what a unit writes is its cache files and run directories,
atomically, and a training run is locked by the process training it (:class:`lexkit.training.runs.RunDir`),
so no two processes train it at once. The parent holds the study directory's lock, so a second
study in the same directory is refused while this one runs. A worker dies with its parent (Linux:
``PR_SET_PDEATHSIG``); a worker that dies (killed, out of memory) stops the study with one line
naming the unit, and a re-run resumes: what is cached is kept, a training run continues from its
last checkpoint. On the CPU at one thread per worker the results are those of one process at one
thread, number for number: every unit depends only on its configuration and the files it reads.

The parent shows one progress bar for the whole study (:func:`lexkit.core.progress.watch`): the share
of the estimated seconds done and the ETA, a schedule of what is left over the workers
(:mod:`lexkit.study.schedule`) with the estimates scaled by how long the finished units took
against theirs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import wait
from typing import Any

from ..core.errors import LexkitError
from ..core.progress import watch
from ..training import distributed
from .schedule import Task, levels, schedule
from .units import Unit, check


class WorkerError(LexkitError, ValueError):
    """A unit of work failed in a worker, or a worker died."""


@dataclasses.dataclass(frozen=True)
class Build:
    """How a worker builds the work it runs: ``make(*args, **kwargs)`` returns an object with
    ``units()`` (the same units as the parent's, by name) and ``cache`` (a
    :class:`lexkit.study.cache.Cache`: its ``device`` is set to the worker's, its ``record`` read
    back); ``tables``, the study tables registered in the parent (a worker registers those it lacks)."""

    make: Callable[..., Any]
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
    tables: tuple = ()


@dataclasses.dataclass
class Tracker:
    """The whole study's progress, for its bar: each unit's estimated seconds, which are done and
    how long they took, which are running and since when, over ``workers``."""

    estimate: dict[str, float]
    needs: dict[str, tuple[str, ...]]
    workers: int
    finished: dict[str, float] = dataclasses.field(default_factory=dict)  # name -> seconds it took
    running: dict[str, float] = dataclasses.field(default_factory=dict)  # name -> when it started
    labels: dict[str, str] = dataclasses.field(default_factory=dict)

    def ratio(self, now: float | None = None) -> float:
        """How long units take against their estimates (1 before any evidence): the finished units'
        seconds over their estimates, with each running unit that has overrun that ratio counted as
        if it finished now (its seconds so far are the least it takes), so the ETA grows while a unit
        overruns instead of freezing and jumping when it ends."""
        now = time.perf_counter() if now is None else now
        guessed = sum(self.estimate[name] for name in self.finished)
        took = sum(self.finished.values())
        first = took / guessed if guessed > 0 and took > 0 else 1.0
        for name, start in self.running.items():
            if now - start > self.estimate[name] * first:
                guessed, took = guessed + self.estimate[name], took + now - start
        return min(4.0, max(0.25, took / guessed)) if guessed > 0 and took > 0 else 1.0

    def state(self, now: float | None = None) -> tuple[float, str, str]:
        """(share of the estimated seconds done, a line: units done and the ETA, what runs)."""
        now = time.perf_counter() if now is None else now
        ratio, total = self.ratio(now), sum(self.estimate.values()) or 1.0
        running = {name: now - start for name, start in self.running.items()}
        done = sum(self.estimate[name] for name in self.finished)
        done += sum(min(self.estimate[name], elapsed / ratio) * 0.95 for name, elapsed in running.items())
        left = [Task(name, self.estimate[name] * ratio, self.needs[name]) for name in self.estimate
                if name not in self.finished and name not in self.running]
        eta = schedule(left, self.workers, {name: max(0.0, self.estimate[name] * ratio - elapsed)
                                            for name, elapsed in running.items()}).makespan
        doing = ", ".join(self.labels.get(name, name) for name in self.running)
        return min(1.0, done / total), f"{len(self.finished)}/{len(self.estimate)} units  eta {clock(eta)}", doing


def clock(seconds: float) -> str:
    """``1:02:03`` / ``4:05``: a duration as a clock reads it."""
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


#: how workers start: ``spawn`` (a fresh interpreter: nothing of the parent's threads or state is
#: inherited). The fast tests fork instead (the same protocol, without importing torch again per worker)
START_METHOD = "spawn"


def run(units: list[Unit], *, jobs: int, build: Build | None = None, devices: list[str] | None = None,
        threads: int = 1, estimate: Callable[[Unit], float] | None = None, cache: Any = None,
        progress: bool = False, echo: Callable[[str], None] = lambda _msg: None, name: str = "study") -> None:
    """Run every unit: with ``jobs`` 1 in this process, in the order given; else those already done
    here (reading their cache, as one process does), then the others over ``jobs`` workers built by
    ``build`` on ``devices`` (one a worker, round robin) at ``threads`` torch threads, each unit once
    what it needs is done, the highest level first (``estimate``: a unit's seconds left; without
    it, the order given). ``cache``: the parent's, whose record the workers' records join. The bar
    (``progress``, labelled ``name``) needs ``estimate``."""
    check(units)
    seconds = {unit.name: (estimate(unit) if estimate is not None else 1.0) for unit in units}
    if jobs == 1:
        _in_process(units, seconds, progress and estimate is not None, echo, name)
        return
    if build is None:
        raise ValueError("running over workers needs how a worker builds the units (build)")
    todo = []
    for unit in units:  # what is done: read here, logged as a single process logs it
        if unit.done():
            unit.work()
        else:
            todo.append(unit)
    if todo:
        _over_workers(todo, seconds, jobs, build, devices or ["cpu"], threads, cache,
                      progress and estimate is not None, echo, name)


def _in_process(units: list[Unit], seconds: dict[str, float], progress: bool, echo: Callable[[str], None],
                name: str) -> None:
    tracker = Tracker(seconds, {u.name: u.needs for u in units}, 1, labels=_labels(units))
    with watch(name, tracker.state, enabled=progress):
        for i, unit in enumerate(units):
            if not progress:
                echo(f"[{i + 1}/{len(units)}] {unit.label}")
            tracker.running[unit.name] = start = time.perf_counter()
            unit.work()
            del tracker.running[unit.name]
            tracker.finished[unit.name] = time.perf_counter() - start


def _labels(units: list[Unit]) -> dict[str, str]:
    """How the bar names a running unit: its kind and label (``train rope + mix, seed 0``)."""
    return {u.name: u.label if u.job == "cell" else f"{u.job} {u.label}" for u in units}


@dataclasses.dataclass(eq=False)
class _Worker:
    process: Any
    conn: Any
    device: str
    unit: Unit | None = None
    started: float = 0.0
    ready: bool = False


def _over_workers(units: list[Unit], seconds: dict[str, float], jobs: int, build: Build, devices: list[str],
                  threads: int, cache: Any, progress: bool, echo: Callable[[str], None], name: str) -> None:
    names = {u.name for u in units}
    level = levels([Task(u.name, seconds[u.name], tuple(n for n in u.needs if n in names)) for u in units])
    order = {u.name: i for i, u in enumerate(units)}
    waiting = sorted(units, key=lambda u: (-level[u.name], order[u.name]))
    tracker = Tracker({u.name: seconds[u.name] for u in units}, {u.name: u.needs for u in units}, jobs,
                      labels=_labels(units))
    context = multiprocessing.get_context(START_METHOD)
    pool = [_start(context, build, devices[i % len(devices)], threads) for i in range(min(jobs, len(units)))]
    done: set[str] = set()
    try:
        with watch(name, tracker.state, enabled=progress):
            while waiting or any(w.unit is not None for w in pool):
                for worker in pool:
                    if worker.ready and worker.unit is None:
                        unit = next((u for u in waiting if all(n in done or n not in names for n in u.needs)), None)
                        if unit is None:
                            break
                        waiting.remove(unit)
                        worker.unit, worker.started = unit, time.perf_counter()
                        tracker.running[unit.name] = worker.started
                        if not progress:
                            echo(f"[{len(done) + 1}/{len(units)}] {unit.label} (worker {pool.index(worker)})")
                        worker.conn.send(unit.name)
                for worker in _ready(pool):
                    message = _receive(worker)
                    if message[0] == "ready":
                        worker.ready = True
                        continue
                    unit = worker.unit
                    if message[0] == "done":
                        _, name, record = message
                        if cache is not None:
                            cache.record.extend(record)
                        done.add(name)
                        del tracker.running[name]
                        tracker.finished[name] = time.perf_counter() - worker.started
                        worker.unit = None
                    else:
                        _, name, text, trace = message
                        raise WorkerError(f"{unit.label if unit else name}: {text}"
                                          + (f"\n(in a worker; its traceback:)\n{trace}" if trace else ""))
    except BaseException:
        _stop(pool)
        raise
    _stop(pool, gently=True)


def _start(context, build: Build, device: str, threads: int) -> _Worker:
    parent, child = context.Pipe()
    process = context.Process(target=_main, args=(child, build, device, threads, os.getpid()), daemon=True)
    process.start()
    child.close()
    return _Worker(process, parent, device)


def _ready(pool: list[_Worker]) -> list[_Worker]:
    """The workers with a message (or dead), waiting up to a second for one."""
    handles = {w.conn: w for w in pool} | {w.process.sentinel: w for w in pool}
    found = wait(list(handles), timeout=1.0)
    return list(dict.fromkeys(handles[h] for h in found))


def _receive(worker: _Worker) -> tuple:
    """The worker's next message; a WorkerError when it died without one."""
    if worker.conn.poll():
        try:
            return worker.conn.recv()
        except (EOFError, OSError):
            pass
    worker.process.join(timeout=5)
    code = worker.process.exitcode
    how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else
           f"exited with code {code}" if code is not None else "stopped answering")
    what = (f"while running {worker.unit.label}" if worker.unit is not None else
            "while idle" if worker.ready else "while starting")
    raise WorkerError(f"a worker (process {worker.process.pid}) {how} {what}; what the study finished is cached: "
                      "run it again to resume (a training run continues from its last checkpoint)")


def _stop(pool: list[_Worker], gently: bool = False) -> None:
    """Every worker stopped: asked to leave (``gently``), else sent SIGTERM (a training run
    checkpoints the step in progress and stops), then waited for."""
    for worker in pool:
        with contextlib.suppress(OSError, ValueError):
            if gently:
                worker.conn.send(None)
            elif worker.process.is_alive():
                worker.process.terminate()
    for worker in pool:
        worker.process.join(timeout=30)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()


def _die_with_parent(parent: int) -> None:
    """Linux: this process is killed when its parent dies (however it dies); elsewhere nothing."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the line above
        os._exit(1)


def _main(conn, build: Build, device: str, threads: int, parent: int) -> None:
    """A worker: build the units, then run each one the parent names until it sends None."""
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; SIGTERM checkpoints a training run
    try:
        from ..core import threads as policy

        if device == "cpu":
            policy.use(threads, "--threads")
        from .schema import TABLES, register_table

        for table in build.tables:
            if table not in TABLES:
                register_table(table)
        work = build.make(*build.args, **build.kwargs)
        work.cache.device = device
        units = {unit.name: unit for unit in work.units()}
    except BaseException as exc:  # noqa: BLE001 (reported to the parent, which stops the study)
        conn.send(("error", "worker", _describe(exc), traceback.format_exc()))
        return
    conn.send(("ready",))
    while True:
        try:
            name = conn.recv()
        except (EOFError, OSError):
            return
        if name is None:
            return
        before = len(work.cache.record)
        try:
            units[name].work()
        except distributed.USER_ERRORS as exc:
            conn.send(("error", name, _describe(exc), None))
            return
        except BaseException as exc:  # noqa: BLE001
            conn.send(("error", name, _describe(exc), traceback.format_exc()))
            return
        conn.send(("done", name, work.cache.record[before:]))


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
