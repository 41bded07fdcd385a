"""What a run of ``lexkit conformance`` checks: the table cases (RoPE embeddings, each adapter against
the float64 reference) or the model cases (whole models, each runtime against the float64 forward), with
the registry its implementations come from, how a cell of its table is written and its JSON document."""

from __future__ import annotations

import dataclasses

from ..core.errors import LexkitError


@dataclasses.dataclass
class Battery:
    """What a run checks: the table cases (RoPE embeddings) or the model cases (whole models)."""

    models: bool
    registry: object  # the adapters' or the model runtimes' Registry
    cases: list
    stem: str  # the files --out writes: STEM.json, STEM.md
    what: str  # what the cases are checked against, in the first line

    @classmethod
    def of(cls, patterns: list[str], models: bool = False) -> Battery:
        """The cases matching ``patterns`` (``--case``): the model battery where ``models`` (``--models``) or
        a pattern names model cases (``models/...``), else the table cases; both at once is refused."""
        from . import ADAPTERS, cases

        model = [p for p in patterns if p == "models" or p.startswith("models/")]
        if not (models or model):
            return cls(False, ADAPTERS, cases(patterns), "conformance",
                       "against lexkit's float64 reference (tolerances: docs/conformance.md)")
        if len(model) != len(patterns):
            raise LexkitError(f"--case {' '.join(p for p in patterns if p not in model)}: the model battery (--models, "
                              "--case 'models/...') runs apart from the table cases; give one kind")
        from . import models as battery

        return cls(True, battery.MODEL_RUNTIMES, battery.cases(model or None), "conformance-models",
                   "against lexkit's float64 forward of the same weights (docs/conformance.md, whole models)")

    def run(self, adapters, root):
        """Every case on every adapter (``root``: where the model cases' checkpoints are kept)."""
        if self.models:
            from . import models

            return models.run(adapters, self.cases, root)
        from . import run

        return run(adapters, self.cases)

    def cell(self):
        """How a result is written in the table: :func:`.report.cell` or :func:`.models.report.cell`."""
        if self.models:
            from .models import report as model_report

            return model_report.cell
        from . import report

        return report.cell

    def to_json(self, results, impls, skipped) -> dict:
        """The run's JSON document (:func:`.report.to_json` or :func:`.models.report.to_json`)."""
        if self.models:
            from .models import report as model_report

            return model_report.to_json(results, impls, self.cases, skipped)
        from . import report

        return report.to_json(results, impls, self.cases, skipped)
