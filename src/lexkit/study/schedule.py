"""Units of work with their seconds and dependencies, scheduled over N workers: the order workers take
them in, and the wall time it comes to (what ``--dry-run`` and the study's ETA say).

List scheduling by critical path (HLFET, Adam, Chandy and Dickson 1974): each task's *level* is its
own seconds plus the longest chain of tasks that wait for it; whenever a worker is free it takes
the ready task (every task it needs finished) of highest level, ties in the order given. With
dependencies the wall time is the schedule's *makespan*, at least the longest chain and at least the
sum over N, and in general neither (a 10 s run that a 10 s scoring waits for, beside a 2 s task,
takes 20 s on any number of workers, not 22 / 2). Pure functions of the tasks: no clock, no torch.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Sequence

INF = float("inf")


@dataclasses.dataclass(frozen=True)
class Task:
    """A unit of work to schedule: its ``name``, its ``seconds`` and the names it ``needs`` (a name
    that is not among the tasks scheduled is taken as done)."""

    name: str
    seconds: float
    needs: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Where each task ran: ``start`` and ``finish`` (seconds from now) and ``worker`` (0 to N-1) by
    name, and the ``makespan`` (when the last finishes)."""

    start: dict[str, float]
    finish: dict[str, float]
    worker: dict[str, int]
    makespan: float

    def order(self) -> list[str]:
        """The names by start time (the order workers take them in)."""
        return sorted(self.start, key=lambda name: (self.start[name], self.worker[name]))


def levels(tasks: Sequence[Task]) -> dict[str, float]:
    """Each task's level: its seconds plus the largest level of the tasks that need it."""
    names = {t.name for t in tasks}
    waiting: dict[str, list[str]] = {t.name: [] for t in tasks}
    for t in tasks:
        for need in t.needs:
            if need in names:
                waiting[need].append(t.name)
    seconds = {t.name: max(0.0, t.seconds) for t in tasks}
    out: dict[str, float] = {}
    for name in reversed(_topological(tasks)):
        out[name] = seconds[name] + max((out[w] for w in waiting[name]), default=0.0)
    return out


def _topological(tasks: Sequence[Task]) -> list[str]:
    """The names in an order where every task comes after those it needs (ValueError on a cycle)."""
    names = {t.name for t in tasks}
    needs = {t.name: [n for n in t.needs if n in names] for t in tasks}
    out, state = [], {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "open":
            raise ValueError(f"tasks that need each other: {' -> '.join((*path, name))}")
        state[name] = "open"
        for need in needs[name]:
            visit(need, (*path, name))
        state[name] = "done"
        out.append(name)

    for t in tasks:
        visit(t.name, ())
    return out


def schedule(tasks: Sequence[Task], workers: int, running: dict[str, float] | None = None) -> Schedule:
    """The tasks over ``workers`` workers by critical path (the module docstring). ``running``:
    tasks already on a worker (name -> seconds they have left), each keeping a worker from time 0
    until it finishes; the others start when a worker is free and what they need has finished."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    running = dict(running or {})
    by_name = {t.name: t for t in tasks}
    level = levels(tasks)
    rank = {t.name: i for i, t in enumerate(tasks)}
    start: dict[str, float] = {}
    finish: dict[str, float] = {}
    worker: dict[str, int] = {}
    free = list(range(workers))
    events: list[tuple[float, int, str]] = []  # (time it finishes, worker, name)
    for name, left in running.items():
        if not free:
            raise ValueError(f"{len(running)} tasks running on {workers} workers")
        w = free.pop(0)
        start[name], finish[name], worker[name] = 0.0, max(0.0, float(left)), w
        heapq.heappush(events, (finish[name], w, name))
    waiting = {t.name: {n for n in t.needs if n in by_name or n in running} for t in tasks if t.name not in running}
    now = 0.0
    while waiting or events:
        ready = sorted((name for name, needs in waiting.items() if all(finish.get(n, INF) <= now for n in needs)),
                       key=lambda name: (-level[name], rank[name]))
        while free and ready:
            name = ready.pop(0)
            w = free.pop(0)
            del waiting[name]
            start[name], worker[name] = now, w
            finish[name] = now + max(0.0, by_name[name].seconds)
            heapq.heappush(events, (finish[name], w, name))
        if not events:
            if waiting:  # nothing running and nothing ready: a task needs one that never finishes
                raise ValueError(f"task {next(iter(waiting))!r} waits for a task that is not scheduled")
            break
        now, w, _ = heapq.heappop(events)
        free.append(w)
        while events and events[0][0] <= now:
            free.append(heapq.heappop(events)[1])
        free.sort()
    return Schedule(start, finish, worker, max(finish.values(), default=0.0))
