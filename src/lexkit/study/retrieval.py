"""The study's table G, "use of context": does a model that survives a long input also *use* it?

Perplexity cannot tell the two apart (a window of W keeps bpb flat at 16x by never looking further
back than W). So the study trains one run per scheme with the measured retrieval mix
(:data:`RECIPE`, docs/retrieval.md) and scores copy needles (:mod:`lexkit.retrieval`) at 1, 2, 4, 8
and 16x its training length under every study pattern, each configuration's bpb at 1x and 16x
beside it. On the ``rope`` run with the mix, the context-extension configurations of table E
(:mod:`lexkit.extension`: the scalings at x16, ReRoPE, leaky ReRoPE + log-n, sinks, and the
fine-tunes at 4x, which continue the run with its mix) are scored the same way.

Cached like every study task::

    DIR/runs/mix-<scheme>-s0-<hash>/          a run trained with the mix
    DIR/runs/mix-rope-s0-<hash>-ft-.../       a table-E fine-tune of it
    DIR/cache/retrieval-<hash>.json           one configuration's retrieval cells and bpb

and listed by ``lexkit study --dry-run``. Why this recipe: on the ``quick`` preset (2 layers,
width 64, length 64) at batch 64, a 75 % copy mix changes phase between steps 750 and 1000 and
retrieves 96-97 % of held-out needles inside the training length after 2,000 steps under causal
attention (rope); 50 % had not changed phase by step 4,000, and the ``small`` preset with a
needle mix copied nothing after 2,000 steps. One seed per scheme.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch

from .. import positions, runs, tasks
from ..device import eval_mode
from ..extension import finetunes, methods
from ..retrieval import DEFAULT_MULTIPLES
from ..rows import RetrievalEntry, RetrievalSection
from .cache import Cache
from .estimate import timed_steps
from .plan import Cell, Plan, digest, slug

#: the schemes table G trains with the mix (those of the study's schemes that are among these)
SCHEMES = ("none", "rope", "xpos", "alibi", "kerple-log", "sandwich", "fire", "pope", "cope", "fox")
#: the measured recipe (docs/retrieval.md): preset, batch, learning rate and mix of the runs
RECIPE = {"preset": "quick", "batch": 64, "lr": 3e-3, "mix": "copy:0.75"}
#: training steps of each run (``lexkit study --retrieval-steps``): where the recipe retrieved 97 %
STEPS = 2000
MULTIPLES = DEFAULT_MULTIPLES  # 1x to 16x the training length
BPB_MULTIPLES = (1, 16)
DEPTHS = (0.0, 25.0, 50.0, 75.0, 100.0)
SAMPLES = 10  # documents per (length, depth): 50 per length
TASK, SIZE = "copy", 12  # copy segments of 12 letters, as measured
#: bump when the meaning of a cached retrieval score changes
VERSION = 1
#: a fine-tune step at 4x the training length costs about 4x a training step (by tokens)
FINETUNE_COST = 4


@dataclasses.dataclass(frozen=True)
class Config:
    """One configuration of table G: a run (by its cell, or a fine-tune of it), the scheme and
    log-n its weights run under, and the patterns it is scored under."""

    label: str
    kind: str  # "scheme", "method" or "fine-tune"
    scheme: str | None  # None: as trained
    logn: bool | None
    patterns: tuple[str, ...]


class RetrievalTable:
    """Table G (a :class:`~lexkit.study.plan.Section`), run by the study's plan and cache."""

    key = "retrieval"

    def __init__(self, plan: Plan, cache: Cache) -> None:
        self.plan, self.cache = plan, cache

    def schemes(self) -> list[str]:
        """The study's schemes that table G trains with the mix, in the study's order (none: off)."""
        if not self.plan.cfg.retrieval:
            return []
        wanted = {positions.canonical(s) for s in SCHEMES}
        return [s for s in self.plan.cfg.schemes if s in wanted]

    def cells(self) -> list[Cell]:
        """One run per scheme of :meth:`schemes`, seed 0, trained with :data:`RECIPE` for the
        study's ``retrieval_steps`` at its ``retrieval_preset``."""
        cfg = self.plan.cfg
        return [self.plan.cell(cfg.retrieval_preset, scheme, 0, prefix="mix-", steps=cfg.retrieval_steps,
                               batch=RECIPE["batch"], lr=RECIPE["lr"], mix=RECIPE["mix"]) for scheme in self.schemes()]

    def train_len(self) -> int:
        return self.plan.train_len(self.plan.cfg.retrieval_preset)

    def configurations(self, cell: Cell) -> list[Config]:
        """The scheme itself under every study pattern, then on ``rope`` (when the study runs table
        E) each no-fine-tune method of table E but plain rope, then each fine-tune."""
        t = self.train_len()
        out = [Config(cell.scheme, "scheme", None, None, tuple(self.plan.patterns(t)))]
        if cell.scheme != "rope" or not self.plan.cfg.extension:
            return out
        for m in methods(t, max(MULTIPLES) * t):
            if (m.scheme, m.pattern, m.logn) != ("rope", "causal", False):
                out.append(Config(m.label, "method", m.scheme, m.logn, (m.pattern,)))
        out += [Config(ft.label, "fine-tune", None, None, ft.patterns) for ft in finetunes(t)]
        return out

    def cache_path(self, key: str, config: Config) -> Path:
        """Where one configuration's scores are cached: keyed by its run and everything scored,
        what defines the needle documents included (:func:`lexkit.tasks.identity`)."""
        cfg = self.plan.cfg
        what = {"run": key, "scheme": config.scheme, "logn": config.logn, "patterns": config.patterns,
                "task": TASK, "documents": tasks.identity(TASK), "size": SIZE, "multiples": MULTIPLES,
                "bpb": BPB_MULTIPLES, "depths": DEPTHS, "samples": cfg.retrieval_samples, "docs": cfg.eval_docs,
                "v": VERSION}
        return self.cache.out / "cache" / f"retrieval-{digest(what)}.json"

    def run(self) -> RetrievalSection | None:
        """Train (or find) every run of table G, score every configuration (or read it from the
        cache); None when the table is off or no studied scheme is among :data:`SCHEMES`."""
        cells = self.cells()
        if not cells:
            return None
        cfg, entries = self.plan.cfg, []
        for cell in cells:
            base = self.cache.run_dir(cell)
            self.cache.trained(base, cell.model_cfg, cell.train_cfg)
            for config in self.configurations(cell):
                entries += self.entries(cell, base, config)
        first = cells[0].train_cfg
        return RetrievalSection(TASK, SIZE, self.train_len(), cfg.retrieval_preset, cfg.retrieval_steps, first.batch,
                                first.lr, first.mix, 1, list(MULTIPLES), list(BPB_MULTIPLES), list(DEPTHS),
                                cfg.retrieval_samples, cfg.extension_steps, entries)

    def entries(self, cell: Cell, base: Path, config: Config) -> list[RetrievalEntry]:
        """One configuration scored (a fine-tune trained first), one entry per pattern."""
        run_dir, key = base, cell.key
        if config.kind == "fine-tune":
            ft = next(f for f in finetunes(self.train_len()) if f.label == config.label)
            model_cfg, train_cfg, key = self.plan.finetune(base, cell, ft)
            run_dir = self.cache.out / "runs" / f"{cell.name}-ft-{slug(ft.scheme)}-{key}"
            self.cache.trained(run_dir, model_cfg, train_cfg, init=base)
        doc = self.cache.cached("retrieval", f"{cell.name} {config.label}", self.cache_path(key, config),
                                lambda: self.score(run_dir, config))
        return [RetrievalEntry.from_json({
            "label": config.label, "kind": config.kind, "scheme": doc["scheme"], "logn": doc["logn"],
            "pattern": pattern, "run": str(run_dir.relative_to(self.cache.out)),
            "rows": [r for r in doc["rows"] if r["pattern"] == pattern],
            "cells": [c for c in doc["cells"] if c["pattern"] == pattern]}) for pattern in doc["patterns"]]

    def score(self, run_dir: Path, config: Config) -> dict:
        """One configuration's retrieval cells and bpb (exact match from the teacher-forced pass,
        :func:`lexkit.retrieval.score` with ``decode=False``)."""
        from ..retrieval import context_rows
        from ..subject import load

        subject = load(run_dir, device=self.cache.device, scheme=config.scheme, logn=config.logn)
        patterns = [subject.model.pattern(p).spec for p in config.patterns]
        rows, found = context_rows(subject, config.label, task=TASK, multiples=MULTIPLES, patterns=patterns,
                                   depths=DEPTHS, samples=self.plan.cfg.retrieval_samples, size=SIZE,
                                   documents=self.plan.corpus.valid, bpb_multiples=BPB_MULTIPLES,
                                   train_len=self.train_len(), max_docs=self.plan.cfg.eval_docs, decode=False,
                                   progress=self.cache.progress)
        return {"scheme": subject.describe()["scheme"], "logn": bool(subject.config["model"].get("logn", False)),
                "patterns": patterns, "rows": [r.to_json() for r in rows], "cells": [c.to_json() for c in found]}

    def tasks(self, grid: dict[str, dict], device) -> list[dict]:
        """Table G's tasks for ``--dry-run``, timed on this machine: one training step of its model
        at the recipe's batch (the median of three after a warm-up step) and one token of its
        forward pass at 16x (:meth:`tasks_at`)."""
        cells = self.cells()
        if not cells:
            return []
        n = max(MULTIPLES) * cells[0].model_cfg.train_len
        model, step_s, probe = timed_steps(cells[0], device, n)
        with eval_mode(model), torch.no_grad():
            t0 = time.perf_counter()
            model(probe)
            per_token = (time.perf_counter() - t0) / n
        return self.tasks_at(step_s, per_token)

    def tasks_at(self, per_step: float, per_token: float) -> list[dict]:
        """Each run's training and each configuration's scoring, with seconds scaled from
        ``per_step`` (one training step of table G's model at the recipe's batch) and ``per_token``
        (one token of its forward pass at 16x): the needle documents and the bpb documents of every
        pattern, and a fine-tune's steps at about :data:`FINETUNE_COST` times a training step."""
        t, cfg = self.train_len(), self.plan.cfg
        needles = len(DEPTHS) * cfg.retrieval_samples
        tokens = sum(m * t for m in MULTIPLES) * needles + sum(m * t for m in BPB_MULTIPLES) * cfg.eval_docs
        out = []
        for cell in self.cells():
            exists = (self.cache.run_dir(cell) / runs.CHECKPOINT).is_file()
            out.append({"kind": "train", "label": f"{cell.scheme} + mix", "run": cell.name, "exists": exists,
                        "seconds": per_step * cell.train_cfg.steps})
            for config in self.configurations(cell):
                seconds = per_token * tokens * len(config.patterns)
                if config.kind == "fine-tune":
                    seconds += per_step * FINETUNE_COST * cfg.extension_steps
                out.append({"kind": config.kind, "label": config.label, "patterns": len(config.patterns),
                            "seconds": seconds})
        return out
