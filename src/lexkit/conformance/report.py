"""The report of a run: implementation x case as a table of cells (``pass 3e-07``, ``FAIL 0.14``,
``n/a``, ``error``), the lines that say what each failure is, and the JSON document."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..core.version import header
from ..documents.blocks import Table
from .cases import Case
from .harness import Result

#: the reports of ``lexkit conformance --json`` (a run; a ``--matrix``'s; ``--models``'): lexkit.core.version.header
REPORT, MATRIX_REPORT, REPORT_VERSION = "lexkit.conformance", "lexkit.conformance.matrix", 2
MODELS_REPORT = "lexkit.conformance.models"
MARK = {"pass": "pass", "fail": "FAIL", "n/a": "n/a", "error": "error"}


#: how a cell names the check its number is of
SHORT = {"inv_freq": "inv_freq", "attention_factor": "a", "tables": "tables", "rotate": "rotate", "scores": "scores"}


def cell(result: Result) -> str:
    """``pass 3.1e-07 tables`` / ``FAIL 0.14 inv_freq``: the status, the largest error of the check
    nearest its bound and that check (cells of one row may be of different checks: each says which)."""
    mark = MARK[result.status]
    if result.status in ("pass", "fail") and result.error is not None:
        check = SHORT.get(result.worst.check, result.worst.check)
        if not math.isfinite(result.error):
            return f"{mark} {'shape' if result.worst.where.startswith('shape') else 'non-finite'} {check}"
        return f"{mark} {result.error:.2g} {check}"
    return mark


def table(results: Sequence[Result], impls: Sequence[str], cases: Sequence[Case], write=cell) -> Table:
    """Cases down, implementations across (each cell by ``write``: a model case's is
    :func:`lexkit.conformance.models.report.cell`)."""
    by = {(r.impl, r.case): r for r in results}
    rows = [[c.name] + [write(by[(i, c.name)]) if (i, c.name) in by else "" for i in impls] for c in cases]
    return Table.of(["case", *impls], rows)


def matrix_table(by_version: dict[str, Sequence[Result]], cases: Sequence[Case], package: str,
                 write=cell) -> Table:
    """Cases down, releases of ``package`` across: when each difference came and went."""
    rows = []
    for c in cases:
        row = [c.name]
        for results in by_version.values():
            found = [r for r in results if r.case == c.name]
            row.append(write(found[0]) if found else "")
        rows.append(row)
    return Table.of(["case", *(f"{package} {v}" for v in by_version)], rows)


def notes(results: Sequence[Result]) -> list[str]:
    """One line per result that is not a pass or an n/a: implementation, case, what differs."""
    return [f"{r.impl} x {r.case}: {r.status}: {r.detail}" for r in results if r.status in ("fail", "error")]


def counts(results: Sequence[Result], impl: str) -> dict[str, int]:
    out = {k: 0 for k in MARK}
    for r in results:
        if r.impl == impl:
            out[r.status] += 1
    return out


def to_json(results: Sequence[Result], implementations: Sequence[dict], cases: Sequence[Case],
            skipped: Sequence[dict]) -> dict:
    """The whole run: versions, the cases (config, calls, checks, why), every result with its findings."""
    return {
        **header(REPORT, REPORT_VERSION),
        "implementations": list(implementations), "skipped": list(skipped),
        "cases": [{"name": c.name, "config": c.config.describe(), "why": c.why, "checks": list(c.checks),
                   "calls": [list(call) for call in c.calls], "refuse": c.refuse,
                   "twin": c.twin.describe() if c.twin is not None else None, "shift": c.shift, "within": c.within}
                  for c in cases],
        "results": [r.to_json() for r in results],
    }
