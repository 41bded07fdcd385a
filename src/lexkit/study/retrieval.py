"""The study's table G, "use of context": does a model that survives a long input also *use* it, and
is what it uses a skill or one format?

Perplexity cannot tell the two apart (a window of W keeps bpb flat at 16x by never looking further
back than W). So the study trains the rows of :data:`ROWS` (one per scheme, and whatever a user or
the lead adds: a layout, a token shift, another step count) with one recipe (:data:`RECIPE`, the
general induction mix of :mod:`lexkit.needles`' trained formats, docs/retrieval.md), each on
``--retrieval-seeds`` seeds, and scores copy needles (:mod:`lexkit.retrieval`) at 1, 2, 4, 8 and
16x its training length under every study pattern, in the classic trained format (``tilde``) and
in every held-out format (``python``, ``hex``, ``caret``: never in training), each configuration's
bpb at 1x and 16x beside it. On the ``rope`` row's seed-0 run, the context-extension configurations
of table E (:mod:`lexkit.extension`: the scalings at x16, ReRoPE, leaky ReRoPE + log-n, sinks, and
the fine-tunes at 4x, which continue the run with its mix) are scored the same way.

Cached like every study task::

    DIR/runs/mix-<scheme>-s<seed>-<hash>/     a run trained with the recipe
    DIR/runs/mix-rope-s0-<hash>-ft-.../       a table-E fine-tune of the rope row's seed-0 run
    DIR/cache/retrieval-<hash>.json           one configuration's retrieval cells (every format) and bpb

and listed by ``lexkit study --dry-run``.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import torch

from .. import needles, positions, runs, tasks
from ..device import eval_mode
from ..extension import finetunes, methods
from ..retrieval import DEFAULT_MULTIPLES
from ..rows import RetrievalEntry, RetrievalSection
from ..settings import configs
from .cache import Cache
from .estimate import timed_steps
from .plan import Cell, Plan, digest, slug
from .recipe import RECIPE

MULTIPLES = DEFAULT_MULTIPLES  # 1x to 16x the training length
BPB_MULTIPLES = (1, 16)
DEPTHS = (0.0, 25.0, 50.0, 75.0, 100.0)
TASK, SIZE = "copy", 12  # copy values of 12 symbols (lowered to what every format fits at 1x)
#: the needle formats every configuration is scored in: the classic trained one, then the held-out ones
FORMATS = ("tilde", *needles.held_out_formats())
#: bump when the meaning of a cached retrieval score changes (2: every format, seeds)
VERSION = 2
#: a fine-tune step at 4x the training length costs about 4x a training step (by tokens)
FINETUNE_COST = 4


@dataclasses.dataclass(frozen=True)
class Trained:
    """A row of table G: a run trained with :data:`RECIPE` on every seed. ``scheme`` (with a
    ``layout``: the scheme of the layers that name none, :mod:`lexkit.layouts`), extra
    ``settings`` of ``lexkit train`` (``{"token_shift": 0.5}``, ``{"n_layers": 4}``), ``steps``
    (None: the study's ``--retrieval-steps``) and the ``patterns`` it is scored under (None: the
    study's). A row without a layout runs when its scheme is one the study studies; a row with one
    always runs."""

    label: str
    scheme: str
    layout: str | None = None
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    steps: int | None = None
    patterns: tuple[str, ...] | None = None

    def describe(self) -> str | None:
        """How it trains beyond the recipe, for the report (None: the recipe as it is)."""
        parts = ([f"layout {self.layout}"] if self.layout else []) + [f"{k} {v}" for k, v in self.settings.items()]
        parts += [f"{self.steps} steps"] if self.steps else []
        return ", ".join(parts) or None


#: table G's rows: every scheme the study may train, with the recipe as it is
ROWS: list[Trained] = [Trained(s, s) for s in ("none", "rope", "xpos", "alibi", "kerple-log", "sandwich",
                                                "fire", "pope", "cope", "fox")]
#: the schemes of :data:`ROWS` (the rows without a layout)
SCHEMES = tuple(r.scheme for r in ROWS if r.layout is None)


@dataclasses.dataclass(frozen=True)
class Config:
    """One configuration of table G: a run (by its cell, or a fine-tune of it), the scheme and
    log-n its weights run under, and the patterns it is scored under."""

    label: str
    kind: str  # "scheme", "method" or "fine-tune"
    scheme: str | None  # None: as trained
    logn: bool | None
    patterns: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Job:
    """One training run of table G: its row and seed, and the study cell that trains it."""

    row: Trained
    cell: Cell


class RetrievalTable:
    """Table G (a :class:`~lexkit.study.plan.Section`), run by the study's plan and cache."""

    key = "retrieval"

    def __init__(self, plan: Plan, cache: Cache) -> None:
        self.plan, self.cache = plan, cache

    def rows(self) -> list[Trained]:
        """The rows this study runs, in order (none: the table is off): those of :data:`ROWS` whose
        scheme the study studies (a row of :data:`ROWS` with a layout always), then one row per
        layout of the study (``--layout``, :data:`~lexkit.study.plan.DEFAULT_LAYOUTS`), labelled
        as given."""
        if not self.plan.cfg.retrieval:
            return []
        studied = set(self.plan.cfg.schemes)
        out = [r for r in ROWS if r.layout is not None or positions.canonical(r.scheme) in studied]
        return out + [Trained(spec, "rope", layout=spec) for spec in self.plan.cfg.layouts
                      if spec not in {r.label for r in out}]

    def settings(self, row: Trained) -> dict[str, Any]:
        """How ``row`` trains: :data:`RECIPE`'s settings for its steps, then the row's own; a layout
        that shifts tokens itself (``+shift``, ``shift=F``) takes no recipe token shift besides."""
        out = RECIPE.settings(row.steps or self.plan.cfg.retrieval_steps) | row.settings
        if row.layout is not None and "token_shift" not in row.settings:
            model_cfg, _ = configs(self.plan.cfg.retrieval_preset, row.scheme, layout=row.layout)
            if any(layer.find("shift") for layer in model_cfg.plan):
                out["token_shift"] = 0.0
        return out

    def jobs(self) -> list[Job]:
        """Every row on every seed (``retrieval_seeds``), trained with :meth:`settings` at the
        study's ``retrieval_preset``."""
        cfg, jobs = self.plan.cfg, []
        for row in self.rows():
            settings = self.settings(row)  # once a row: a layout is parsed to see whether it shifts tokens
            jobs += [Job(row, self.plan.cell(cfg.retrieval_preset, row.scheme, seed, prefix="mix-", layout=row.layout,
                                             **settings))
                     for seed in range(cfg.retrieval_seeds)]
        return jobs

    def cells(self) -> list[Cell]:
        return [job.cell for job in self.jobs()]

    def train_len(self) -> int:
        return self.plan.train_len(self.plan.cfg.retrieval_preset)

    def size(self) -> int:
        """The needle size: :data:`SIZE`, lowered until every format fits the training length."""
        return min(tasks.fitting_size(TASK, self.train_len(), SIZE, name) for name in FORMATS)

    def configurations(self, job: Job) -> list[Config]:
        """The row itself under its patterns, then on the ``rope`` row's seed-0 run (when the study
        runs table E) each no-fine-tune method of table E but plain rope, then each fine-tune."""
        t = self.train_len()
        out = [Config(job.row.label, "scheme", None, None, job.row.patterns or tuple(self.plan.patterns(t)))]
        if job.row != Trained("rope", "rope") or job.cell.seed != 0 or not self.plan.cfg.extension:
            return out
        for m in methods(t, max(MULTIPLES) * t):
            if (m.scheme, m.pattern, m.logn) != ("rope", "causal", False):
                out.append(Config(m.label, "method", m.scheme, m.logn, (m.pattern,)))
        out += [Config(ft.label, "fine-tune", None, None, ft.patterns) for ft in finetunes(t)]
        return out

    def cache_path(self, key: str, config: Config) -> Path:
        """Where one configuration's scores are cached: keyed by its run and everything scored,
        what defines the needle documents included (:func:`lexkit.tasks.identity` per format)."""
        cfg = self.plan.cfg
        what = {"run": key, "scheme": config.scheme, "logn": config.logn, "patterns": config.patterns,
                "task": TASK, "documents": [tasks.identity(TASK, f) for f in FORMATS], "formats": FORMATS,
                "size": self.size(), "multiples": MULTIPLES, "bpb": BPB_MULTIPLES, "depths": DEPTHS,
                "samples": cfg.retrieval_samples, "docs": cfg.eval_docs, "v": VERSION}
        return self.cache.out / "cache" / f"retrieval-{digest(what)}.json"

    def run(self) -> RetrievalSection | None:
        """Train (or find) every run of table G, score every configuration (or read it from the
        cache); None when the table is off or it has no rows."""
        jobs = self.jobs()
        if not jobs:
            return None
        cfg, entries = self.plan.cfg, []
        for job in jobs:
            base = self.cache.run_dir(job.cell)
            self.cache.trained(base, job.cell.model_cfg, job.cell.train_cfg)
            for config in self.configurations(job):
                entries += self.entries(job, base, config)
        return RetrievalSection(TASK, self.size(), self.train_len(), cfg.retrieval_preset, cfg.retrieval_steps,
                                RECIPE.batch, RECIPE.lr, RECIPE.mix, cfg.retrieval_seeds, list(MULTIPLES),
                                list(BPB_MULTIPLES), list(DEPTHS), cfg.retrieval_samples, cfg.extension_steps,
                                entries, [f for f in FORMATS if needles.get(f).trained],
                                [f for f in FORMATS if not needles.get(f).trained])

    def entries(self, job: Job, base: Path, config: Config) -> list[RetrievalEntry]:
        """One configuration scored (a fine-tune trained first), one entry per pattern and format."""
        run_dir, key, cell = base, job.cell.key, job.cell
        if config.kind == "fine-tune":
            ft = next(f for f in finetunes(self.train_len()) if f.label == config.label)
            model_cfg, train_cfg, key = self.plan.finetune(base, cell, ft)
            run_dir = self.cache.out / "runs" / f"{cell.name}-ft-{slug(ft.scheme)}-{key}"
            self.cache.trained(run_dir, model_cfg, train_cfg, init=base)
        doc = self.cache.cached("retrieval", f"{cell.name} {config.label}", self.cache_path(key, config),
                                lambda: self.score(run_dir, config))
        return [RetrievalEntry.from_json({
            "label": config.label, "kind": config.kind, "scheme": doc["scheme"], "logn": doc["logn"],
            "pattern": pattern, "run": str(run_dir.relative_to(self.cache.out)), "seed": cell.seed, "format": name,
            "held_out": not needles.get(name).trained, "training": job.row.describe(),
            "rows": [r for r in doc["formats"][name]["rows"] if r["pattern"] == pattern],
            "cells": [c for c in doc["formats"][name]["cells"] if c["pattern"] == pattern]})
            for pattern in doc["patterns"] for name in FORMATS]

    def score(self, run_dir: Path, config: Config) -> dict:
        """One configuration's retrieval cells and bpb in every format of :data:`FORMATS` (exact
        match from the teacher-forced pass, :func:`lexkit.retrieval.score` with ``decode=False``;
        bpb measured once and written beside every format's rows)."""
        from ..retrieval import context_rows
        from ..subject import load

        subject = load(run_dir, device=self.cache.device, scheme=config.scheme, logn=config.logn)
        patterns = [subject.model.pattern(p).spec for p in config.patterns]
        scored, bpb = {}, {}
        for name in FORMATS:
            rows, found = context_rows(subject, config.label, task=TASK, multiples=MULTIPLES, patterns=patterns,
                                       depths=DEPTHS, samples=self.plan.cfg.retrieval_samples, size=self.size(),
                                       documents=self.plan.corpus.valid, bpb_multiples=() if bpb else BPB_MULTIPLES,
                                       train_len=self.train_len(), max_docs=self.plan.cfg.eval_docs, decode=False,
                                       progress=self.cache.progress, format=name)
            bpb = bpb or {(r.pattern, r.multiple): r.bpb for r in rows}
            scored[name] = {"rows": [dict(r.to_json(), bpb=bpb.get((r.pattern, r.multiple))) for r in rows],
                            "cells": [c.to_json() for c in found]}
        return {"scheme": subject.describe()["scheme"], "logn": bool(subject.config["model"].get("logn", False)),
                "patterns": patterns, "formats": scored}

    def tasks(self, grid: dict[str, dict], device) -> list[dict]:
        """Table G's tasks for ``--dry-run``, timed on this machine: one training step of its model
        at the recipe's batch (the median of three after a warm-up step) and one token of its
        forward pass at 16x (:meth:`tasks_at`)."""
        jobs = self.jobs()
        if not jobs:
            return []
        n = max(MULTIPLES) * jobs[0].cell.model_cfg.train_len
        model, step_s, probe = timed_steps(jobs[0].cell, device, n)
        with eval_mode(model), torch.no_grad():
            t0 = time.perf_counter()
            model(probe)
            per_token = (time.perf_counter() - t0) / n
        return self.tasks_at(step_s, per_token)

    def tasks_at(self, per_step: float, per_token: float) -> list[dict]:
        """Each run's training and each configuration's scoring, with seconds scaled from
        ``per_step`` (one training step of table G's model at the recipe's batch) and ``per_token``
        (one token of its forward pass at 16x): the needle documents of every format and the bpb
        documents, under every pattern, and a fine-tune's steps at about :data:`FINETUNE_COST`
        times a training step."""
        t, cfg = self.train_len(), self.plan.cfg
        needles_per = len(DEPTHS) * cfg.retrieval_samples * len(FORMATS)
        tokens = sum(m * t for m in MULTIPLES) * needles_per + sum(m * t for m in BPB_MULTIPLES) * cfg.eval_docs
        out = []
        for job in self.jobs():
            exists = (self.cache.run_dir(job.cell) / runs.CHECKPOINT).is_file()
            out.append({"kind": "train", "label": f"{job.row.label} + mix, seed {job.cell.seed}", "run": job.cell.name,
                        "exists": exists, "seconds": per_step * job.cell.train_cfg.steps})
            for config in self.configurations(job):
                seconds = per_token * tokens * len(config.patterns)
                if config.kind == "fine-tune":
                    seconds += per_step * FINETUNE_COST * cfg.extension_steps
                out.append({"kind": config.kind, "label": config.label, "patterns": len(config.patterns),
                            "seconds": seconds})
        return out
