"""A recorded rule that stops a run trained with a retrieval mix once its training probe has converged.

A run with ``--mix`` logs, at every validation, each mix task's probe: the share of fixed
evaluation-split documents whose answer the model gets right at every byte (``val_<task>_exact``,
:func:`lexkit.training.loop.validation_tasks`; the trained needle formats, never the held-out ones). The rule
``probe:exact=E,probes=K,after=S`` stops the run at the first validation, at step S or later, where
the last K validations each had every task's probe at E or more; the run ends there with a
checkpoint that says so (``"stopped"`` in its trainer state: the step), and its metrics row of that
step carries ``"stopped": true``. Being part of the training config, the rule is in config.json and
in every cache key of the run; a resumed run reads the probes of its metrics up to its checkpoint,
so it stops at the step an uninterrupted run stops at.

What it costs: the run stops where its learning rate still is (the cosine is set for the run's
full steps), so its bpb is that of a shorter, unannealed run, and two rows that stop at different
steps differ in budget; the held-out formats are not watched (the rule never looks at what the
table measures as generalization).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..core.specs import Param, parse_params, split_spec

NAME = "probe"
PARAMS = {
    "exact": Param(float, 0.9, "the probe's exact match every task must reach", lambda x: 0.0 < x <= 1.0,
                   "in (0, 1]"),
    "probes": Param(int, 5, "consecutive validations at that level", lambda x: x >= 1, ">= 1"),
    "after": Param(int, 0, "the first step it may stop at", lambda x: x >= 0, ">= 0"),
}
#: how a user writes "no rule" (besides the empty string)
OFF = ("", "off", "none")


@dataclasses.dataclass(frozen=True)
class StopRule:
    """The rule of the module docstring."""

    exact: float
    probes: int
    after: int

    @property
    def spec(self) -> str:
        """The rule written out, every value given (defaults too: a recorded rule reads whole)."""
        return f"{NAME}:exact={self.exact:g},probes={self.probes},after={self.after}"


def parse(spec: str) -> StopRule | None:
    """The rule a spec writes (None for no rule: ``""``, ``off``, ``none``); ValueError naming the
    bad part otherwise."""
    if not isinstance(spec, str):
        raise ValueError(f"stop rule must be a string like {NAME}:exact=0.9,probes=5,after=2000, got {spec!r}")
    if spec.strip().lower() in OFF:
        return None
    name, items = split_spec(spec)
    if name != NAME:
        raise ValueError(f"unknown stop rule {name!r}: write {NAME}:exact=E,probes=K,after=S "
                         f"(or off); keys: {', '.join(PARAMS)}")
    return StopRule(**parse_params(f"stop rule {spec!r}", PARAMS, items))


def canonical(spec: str) -> str:
    """The rule written canonically (``""`` for no rule)."""
    rule = parse(spec)
    return "" if rule is None else rule.spec


def probe_keys(tasks: Sequence[str]) -> list[str]:
    """The metrics keys the rule watches: each mix task's trained-format probe."""
    return [f"val_{task}_exact" for task in tasks]


def stop_step(rows: Sequence[dict], rule: StopRule, tasks: Sequence[str]) -> int | None:
    """The step at which ``rule`` stops a run whose metrics are ``rows`` (in order), watching the
    probes of ``tasks``: the first validation row at step ``after`` or later that ends a run of
    ``probes`` consecutive validations with every probe at ``exact`` or more; None if none does."""
    keys = probe_keys(tasks)
    if not keys:
        return None
    streak = 0
    for row in rows:
        if not all(key in row for key in keys):
            continue  # not a validation row
        streak = streak + 1 if all(row[key] >= rule.exact for key in keys) else 0
        if streak >= rule.probes and row["step"] >= rule.after:
            return int(row["step"])
    return None
