"""The study's table E: the context-extension configurations of :mod:`lexkit.extension` on
every seed's ``rope`` run, evaluated with the study's protocol, and their fine-tunes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .. import runs
from ..evaluate import evaluate
from ..extension import Method, finetunes, methods
from ..rows import EvalRow, ExtensionRow, ExtensionSection, Finetuned
from .cache import Cache
from .plan import EVAL_VERSION, Cell, Plan, digest, slug


class ExtensionTable:
    """Table E (a :class:`~lexkit.study.plan.Section`), run by the study's plan and cache."""

    key = "extension"

    def __init__(self, plan: Plan, cache: Cache) -> None:
        self.plan, self.cache = plan, cache

    def rope_cells(self) -> list[Cell]:
        """Every seed's ``rope`` run of the grid (none: the table is off)."""
        return [cell for cell in self.plan.cells() if cell.scheme == "rope"] if self.plan.cfg.extension else []

    def run(self) -> ExtensionSection | None:
        """Each no-fine-tune method on every seed's ``rope`` run, and each fine-tune at 4x under its
        patterns, evaluated at the study's lengths with the study's protocol. None when ``rope`` is
        not a studied scheme or the comparison is switched off."""
        rope = self.rope_cells()
        if not rope:
            return None
        t, lengths = self.plan.train_len(), self.plan.lengths()
        rows = []
        for cell in rope:
            rows += [row for method in methods(t, max(lengths)) for row in self.method_rows(cell, method)]
            rows += [row for ft in finetunes(t) for row in self.finetune_rows(cell, ft)]
        return ExtensionSection(max(lengths) / t, finetunes(t)[0].train_len, self.plan.cfg.extension_steps, rows)

    def method_rows(self, cell: Cell, method: Method) -> list[ExtensionRow]:
        base = self.cache.run_dir(cell)
        ev = self.cache.cached("extension", f"{cell.name} {method.label}", self.path(cell, method),
                               lambda: self.evaluate(runs.load(base, device=self.cache.device, scheme=method.scheme,
                                                               logn=method.logn)[0], [method.pattern]))
        return [ExtensionRow(method.label, method.scheme, ev["patterns"][0], method.logn, None, cell.seed,
                             [EvalRow.from_json(r) for r in ev["results"]])]

    def finetune_rows(self, cell: Cell, ft) -> list[ExtensionRow]:
        base = self.cache.run_dir(cell)
        model_cfg, train_cfg, key = self.plan.finetune(base, cell, ft)
        run_dir = self.cache.out / "runs" / f"{cell.name}-ft-{slug(ft.scheme)}-{key}"
        self.cache.trained(run_dir, model_cfg, train_cfg, init=base)
        ev = self.cache.cached("extension", run_dir.name, self.path(cell, ft, key), lambda: self.evaluate(
            runs.load(run_dir, device=self.cache.device)[0], list(ft.patterns)))
        tuned = Finetuned(str(run_dir.relative_to(self.cache.out)), ft.train_len, train_cfg.steps, train_cfg.lr)
        return [ExtensionRow(ft.label, model_cfg.scheme, pattern, False, tuned, cell.seed,
                             [EvalRow.from_json(r) for r in ev["results"] if r["pattern"] == pattern])
                for pattern in ev["patterns"]]

    def path(self, cell: Cell, what, key: str = "") -> Path:
        """Where one configuration's evaluation is cached."""
        digest_of = digest({"run": cell.key, "what": dataclasses.asdict(what), "ft": key,
                            "lengths": self.plan.lengths(), "docs": self.plan.cfg.eval_docs, "v": EVAL_VERSION})
        return self.cache.out / "cache" / f"extension-{digest_of}.json"

    def evaluate(self, model, patterns: list[str]) -> dict:
        return evaluate(model, self.plan.corpus.valid, self.plan.lengths(), patterns, max_docs=self.plan.cfg.eval_docs,
                        progress=self.cache.progress)

    def tasks(self, grid: dict[str, dict], device=None) -> list[dict]:
        """Table E's tasks, one per seed of ``rope``: each method evaluated without fine-tuning,
        and each fine-tune (``extension_steps`` steps at 4x the training length) then evaluated
        under its patterns; empty when the table is off. The seconds scale the grid's measured
        ``rope`` (a fine-tune step costs about 4x a training step, by tokens; one evaluation costs
        the study's per-pattern one)."""
        rope, measured = self.rope_cells(), grid.get("rope")
        if not rope or measured is None:
            return []
        t, cfg = self.plan.train_len(), self.plan.cfg
        per_eval = measured["eval_s"] / len(self.plan.patterns())
        per_step = measured["train_s"] / rope[0].train_cfg.steps
        tasks = [{"kind": "evaluate", "label": m.label, "seconds": per_eval}
                 for m in methods(t, max(self.plan.lengths()))]
        tasks += [{"kind": "fine-tune", "label": ft.label, "steps": cfg.extension_steps,
                   "seconds": per_step * ft.train_len / t * cfg.extension_steps + per_eval * len(ft.patterns)}
                  for ft in finetunes(t)]
        return [dict(task, seed=seed) for seed in range(cfg.seeds) for task in tasks]
