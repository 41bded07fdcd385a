"""The units of a study's work: each a piece that runs on its own through the study's cache (a cell of
the grid trained and measured, one of table E's configurations, one of table G's runs or scorings),
with what it needs done first and how to time it.

A unit's ``work`` computes through the cache (what is done is read back, what is not is computed and
stored), so running a unit twice, in any process, computes it once; ``needs`` names the units whose
files it reads (a method's scoring needs its run trained); ``done`` says whether the study directory
holds all of it; ``cost`` times it on this machine (:class:`lexkit.study.estimate.Timer`), whole and
what is left of it (a training run: the steps past its checkpoint). The study runs its units in one
process or over workers (:mod:`lexkit.study.workers`), and ``--dry-run`` schedules them
(:mod:`lexkit.study.schedule`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..training import runs

#: the ``table`` of the grid's units (tables A-D)
GRID = "grid"


@dataclasses.dataclass(frozen=True)
class Cost:
    """What a unit costs on this machine, in seconds: ``seconds`` (the whole unit), ``left`` (what
    the study directory does not hold yet: a training run from its checkpoint's step on), ``least``
    (for a run whose stop rule may end it early: what is left if it stops at its earliest; None:
    ``left``), ``parts`` (its pieces by name, for the dry run: ``train_s``, ``eval_s``) and, for a
    table without units of its own, ``tasks`` (its ``tasks()``, as the dry run lists them)."""

    seconds: float
    left: float
    least: float | None = None
    parts: dict[str, float] = dataclasses.field(default_factory=dict)
    tasks: list[dict] = dataclasses.field(default_factory=list)


def whole_or_none(seconds: float, done: bool, **parts: float) -> Cost:
    """The cost of a unit done all at once: ``seconds``, all of it left unless ``done``."""
    return Cost(seconds, 0.0 if done else seconds, parts=parts)


def training(per_step: float, steps: int, state: dict | None, stop_after: int | None = None) -> Cost:
    """The cost of a training run of ``steps`` steps at ``per_step`` seconds each, its trainer
    ``state`` (None: not started) saying how far it is; with a stop rule (``stop_after``: the first
    step it may stop at), ``least`` is what is left if it stops there."""
    done = 0 if state is None else steps if runs.finished(state, steps) else int(state.get("step", 0))
    least = None if stop_after is None or done >= steps else per_step * max(0, min(steps, stop_after) - done)
    return Cost(per_step * steps, per_step * (steps - done), least, {"train_s": per_step * steps, "done_steps": done})


@dataclasses.dataclass(frozen=True, eq=False)
class Unit:
    """One unit of work: ``name`` (unique in the study: its job and the run or cache it fills),
    ``job`` (``cell``, ``train``, ``evaluate``, ``fine-tune``, ``score``, ``task``, ``table``), ``label``
    (what the dry run and the progress bar call it), ``table`` (:data:`GRID` or the table's key),
    ``work`` (runs it through the cache), ``cost`` (its whole time in seconds, measured through a
    timer), ``needs`` (the names of the units it reads), ``left`` (the share still to do: 1.0 all,
    0.0 done) and ``info`` (what the dry run prints beside it: ``seed``, ``run``, ``steps``, ...)."""

    name: str
    job: str
    label: str
    table: str
    work: Callable[[], Any]
    cost: Callable[[Any], Cost]
    needs: tuple[str, ...] = ()
    done: Callable[[], bool] = lambda: False
    info: dict = dataclasses.field(default_factory=dict)


def check(units: list[Unit]) -> list[Unit]:
    """``units`` as given, after checking that names are unique and every unit needs only units
    before it (so the order given is one a single process can follow); ValueError otherwise."""
    seen: set[str] = set()
    for unit in units:
        if unit.name in seen:
            raise ValueError(f"two units of work are named {unit.name!r}")
        missing = [need for need in unit.needs if need not in seen]
        if missing:
            raise ValueError(f"unit {unit.name!r} needs {missing[0]!r}, which is not a unit before it")
        seen.add(unit.name)
    return units
