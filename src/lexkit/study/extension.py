"""The study's table E: the context-extension configurations of :mod:`lexkit.extension` on
every seed's ``rope`` run, evaluated with the study's protocol, and their fine-tunes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .. import runs
from ..evaluate import evaluate
from ..extension import finetunes, methods
from ..train import configs_from_run
from .plan import EVAL_VERSION, Cell, digest, slug


class ExtensionTable:
    """Table E and its plan (mixed into :class:`lexkit.study.Study`)."""

    def extension(self) -> dict | None:
        """The context-extension comparison (:mod:`lexkit.extension`) on every seed's ``rope``
        run: each no-fine-tune method, and each fine-tune at 4x under its patterns, evaluated at
        the study's lengths with the study's protocol. None when ``rope`` is not a studied scheme
        or the comparison is switched off."""
        rope = [cell for cell in self.cells() if cell.scheme == "rope"]
        if not self.cfg.extension or not rope:
            return None
        t, lengths = self.train_len(), self.lengths()
        rows = []
        for cell in rope:
            base = self.out / "runs" / cell.name
            for method in methods(t, max(lengths)):
                ev = self.cached("extension", f"{cell.name} {method.label}", self.extension_path(cell, method),
                                  lambda m=method, b=base: self.evaluate_patterns(
                                      runs.load(b, device=self.device, scheme=m.scheme, logn=m.logn)[0], [m.pattern]))
                rows.append({"label": method.label, "scheme": method.scheme, "pattern": ev["patterns"][0],
                             "logn": method.logn, "finetune": None, "seed": cell.seed, "results": ev["results"]})
            for ft in finetunes(t):
                model_cfg, train_cfg, key = self.finetune(cell, ft)
                steps = train_cfg.steps
                run_dir = self.out / "runs" / f"{cell.name}-ft-{slug(ft.scheme)}-{key}"
                self.trained(run_dir, model_cfg, train_cfg, init=base)
                ev = self.cached("extension", f"{run_dir.name}", self.extension_path(cell, ft, key),
                                  lambda d=run_dir, f=ft: self.evaluate_patterns(runs.load(d, device=self.device)[0],
                                                                         list(f.patterns)))
                for pattern in ev["patterns"]:
                    rows.append({"label": ft.label, "scheme": model_cfg.scheme, "pattern": pattern, "logn": False,
                                 "finetune": {"run": str(run_dir.relative_to(self.out)), "train_len": ft.train_len,
                                              "steps": steps, "lr": train_cfg.lr},
                                 "seed": cell.seed, "results": [r for r in ev["results"] if r["pattern"] == pattern]})
        return {"factor": max(lengths) / t, "finetune_len": finetunes(t)[0].train_len,
                "finetune_steps": self.cfg.extension_steps, "rows": rows}

    def finetune(self, cell: Cell, ft) -> tuple[Any, Any, str]:
        """The configs of one context-extension fine-tune of ``cell``'s run and its cache key. It
        checkpoints like any run (4 times), so an interrupted study resumes it where it
        stopped; the key leaves the checkpoint interval out (it does not change the run), so a
        study cached before keeps its fine-tunes."""
        steps = self.cfg.extension_steps
        base = self.out / "runs" / cell.name
        model_cfg, train_cfg = configs_from_run(
            base, scheme=ft.scheme, train_len=ft.train_len, steps=steps, warmup=max(1, steps // 10),
            eval_every=steps, save_every=max(1, -(-steps // 4)))
        key = digest({"parent": cell.key, "model": model_cfg.identity(),
                      "train": dataclasses.asdict(dataclasses.replace(train_cfg, save_every=steps))})
        return model_cfg, train_cfg, key

    def extension_path(self, cell: Cell, what, key: str = "") -> Path:
        digest_of = digest({"run": cell.key, "what": dataclasses.asdict(what), "ft": key, "lengths": self.lengths(),
                            "docs": self.cfg.eval_docs, "v": EVAL_VERSION})
        return self.out / "cache" / f"extension-{digest_of}.json"

    def evaluate_patterns(self, model, patterns: list[str]) -> dict:
        return evaluate(model, self.corpus.valid, self.lengths(), patterns, max_docs=self.cfg.eval_docs,
                        progress=self.progress)

    def extension_plan(self, rope: dict | None) -> list[dict]:
        """The context-extension table's tasks (table E), one per seed of ``rope``: each method
        evaluated without fine-tuning, and each fine-tune (``extension_steps`` steps at 4x the
        training length) then evaluated under its patterns; empty when the table is off or
        ``rope`` is not studied. ``rope``: its measured ``train_s``/``eval_s``, which the
        seconds scale (a fine-tune step costs about 4x a training step, by tokens; one
        evaluation costs the study's per-pattern one)."""
        if not self.cfg.extension or rope is None:
            return []
        t, cell = self.train_len(), next(c for c in self.cells() if c.scheme == "rope")
        per_eval = rope["eval_s"] / len(self.patterns())
        per_step = rope["train_s"] / cell.train_cfg.steps
        tasks = [{"kind": "evaluate", "label": m.label, "seconds": per_eval} for m in methods(t, max(self.lengths()))]
        tasks += [{"kind": "fine-tune", "label": ft.label, "steps": self.cfg.extension_steps,
                   "seconds": per_step * ft.train_len / t * self.cfg.extension_steps + per_eval * len(ft.patterns)}
                  for ft in finetunes(t)]
        return [dict(task, seed=seed) for seed in range(self.cfg.seeds) for task in tasks]
