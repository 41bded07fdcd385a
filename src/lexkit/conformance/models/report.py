"""The report of ``lexkit conformance --models``: model case x runtime as cells (``pass 8.5e-06``,
``FAIL prefill@2048 @16 0.48``, ``n/a``, ``error``), and the JSON document."""

from __future__ import annotations

from collections.abc import Sequence

from ...core.version import header
from ..report import MARK, MODELS_REPORT, REPORT_VERSION
from .cases import ModelCase
from .harness import MARGIN, ModelResult


def cell(result: ModelResult) -> str:
    """``pass 8.5e-06`` (the largest error of any check) or ``FAIL decode/3 @16 0.48`` (the check that left
    the band first, the position and its error there)."""
    mark = MARK[result.status]
    if result.status == "pass" and result.checks:
        return f"{mark} {max(c.error for c in result.checks):.2g}"
    if result.status == "fail":
        bad = result.worst
        return f"{mark} {bad.check} @{bad.first} {bad.first_error:.2g}"
    return mark


def to_json(results: Sequence[ModelResult], runtimes: Sequence[dict], cases: Sequence[ModelCase],
            skipped: Sequence[dict]) -> dict:
    """The whole run: the runtimes and versions, the cases (config, why, source), every result and check."""
    return {
        **header(MODELS_REPORT, REPORT_VERSION), "band_margin": MARGIN,
        "runtimes": list(runtimes), "skipped": list(skipped),
        "cases": [{"name": c.name, "model_type": c.model_type, "config": c.hf_config, "original": c.original,
                   "lengths": list(c.lengths), "why": c.why, "source": c.source} for c in cases],
        "results": [r.to_json() for r in results],
    }
