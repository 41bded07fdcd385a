"""Table G, "use of context": does a model that survives a long input also *use* it, and is what
it uses a skill or one format?

Perplexity cannot tell the two apart (a window of W keeps bpb flat at 16x by never looking further
back than W). So the study trains the rows of :data:`ROWS` (one per scheme, and whatever a user or
the lead adds: a layout, a token shift, another step count) with one recipe (:data:`RECIPE`, the
general induction mix of :mod:`lexkit.needles`' trained formats, docs/retrieval.md), each on
``--retrieval-seeds`` seeds, and scores copy needles (:mod:`lexkit.retrieval`) at 1, 2, 4, 8 and
16x its training length under every study pattern, in the classic trained format (``tilde``) and
in every held-out format (``python``, ``hex``, ``caret``: never in training), each configuration's
bpb at 1x and 16x beside it. On the ``rope`` row's seed-0 run, the context-extension configurations
of table E (:mod:`lexkit.study.tables.extension`: the scalings at x16, ReRoPE, leaky ReRoPE + log-n,
sinks, and the fine-tunes at 4x, which continue the run with its mix) are scored the same way.

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

from .... import needles, positions, presets, runs, tasks
from ....device import eval_mode
from ....retrieval import DEFAULT_MULTIPLES, context_rows
from ....settings import configs
from ....subject import load
from ....tasks import fitting_size
from ...estimate import timed_steps
from ...plan import Bound, Cell, TableSettings, digest
from ...recipe import RECIPE
from ..extension import finetunes, methods
from ..extension.finetune import finetune, seconds
from ..extension.rows import KEY as EXTENSION
from . import figures, queries, report
from .rows import KEY, FormatScores, RetrievalEntry, RetrievalSection, Scores

MULTIPLES = DEFAULT_MULTIPLES  # 1x to 16x the training length
BPB_MULTIPLES = (1, 16)
DEPTHS = (0.0, 25.0, 50.0, 75.0, 100.0)
TASK, SIZE = "copy", 12  # copy values of 12 symbols (lowered to what every format fits at 1x)
#: the needle formats every configuration is scored in: the classic trained one, then the held-out ones
FORMATS = ("tilde", *needles.held_out_formats())
#: bump when the meaning of a cached retrieval score changes (2: every format, seeds)
VERSION = 2


@dataclasses.dataclass
class RetrievalSettings(TableSettings):
    """Table G's settings: ``on`` (``--no-retrieval``), and its runs' ``steps`` and ``preset`` (the
    measured recipe's by default), the needle documents per length, depth and format (``samples``)
    and the ``seeds`` of each row."""

    on: bool = dataclasses.field(default=True, metadata={
        "help": "skip table G, use of context (runs trained with a retrieval mix, needles at 1-16x)"})
    steps: int = dataclasses.field(default=RECIPE.steps, metadata={
        "help": "training steps of each run with the retrieval mix in table G, use of context "
                f"(default: {RECIPE.steps}, the measured recipe's; docs/retrieval.md)"})
    preset: str = dataclasses.field(default=RECIPE.preset, metadata={
        "help": f"size preset of table G's runs (default: {RECIPE.preset}, the measured recipe's)",
        "choices": list(presets.PRESETS)})
    samples: int = dataclasses.field(default=20, metadata={
        "help": "copy needles per length, depth and format in table G (default: 20)"})
    seeds: int = dataclasses.field(default=3, metadata={
        "help": "seeds of each of table G's rows (mean and spread; default: 3)", "maximum": 1000})


@dataclasses.dataclass(frozen=True)
class RowSpec:
    """What one row of table G trains, with :data:`RECIPE` on every seed: ``scheme`` (with a
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
ROWS: list[RowSpec] = [RowSpec(s, s) for s in ("none", "rope", "xpos", "alibi", "kerple-log", "sandwich",
                                               "fire", "pope", "cope", "fox")]
#: the schemes of :data:`ROWS` (the rows without a layout)
SCHEMES = tuple(r.scheme for r in ROWS if r.layout is None)


@dataclasses.dataclass(frozen=True)
class Configuration:
    """What table G scores on one of its runs: the run as trained (``kind`` ``"scheme"``), one of
    table E's methods on its weights (``"method"``: the ``scheme`` and ``logn`` they run under;
    None: as trained), or a fine-tune of it (``"fine-tune"``), under ``patterns``."""

    label: str
    kind: str  # "scheme", "method" or "fine-tune"
    scheme: str | None  # None: as trained
    logn: bool | None
    patterns: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class SeedRun:
    """One row of table G on one seed: its spec and the study cell that trains it."""

    row: RowSpec
    cell: Cell


class RetrievalTable(Bound):
    """Table G (a :class:`~lexkit.study.plan.Table`), run by the study's plan and cache."""

    key, Settings, row = KEY, RetrievalSettings, RetrievalSection
    blocks, figures, scalars = staticmethod(report.blocks), figures.FIGURES, staticmethod(queries.scalars)

    def rows(self) -> list[RowSpec]:
        """The rows this study runs, in order (none: the table is off): those of :data:`ROWS` whose
        scheme the study studies (a row of :data:`ROWS` with a layout always), then one row per
        layout of the study (``--layout``, :data:`~lexkit.study.plan.DEFAULT_LAYOUTS`), labelled
        as given."""
        if not self.settings.on:
            return []
        studied = set(self.plan.cfg.schemes)
        out = [r for r in ROWS if r.layout is not None or positions.canonical(r.scheme) in studied]
        return out + [RowSpec(spec, "rope", layout=spec) for spec in self.plan.cfg.layouts
                      if spec not in {r.label for r in out}]

    def training(self, row: RowSpec) -> dict[str, Any]:
        """How ``row`` trains: :data:`RECIPE`'s settings for its steps, then the row's own; a layout
        that shifts tokens itself (``+shift``, ``shift=F``) takes no recipe token shift besides."""
        out = RECIPE.settings(row.steps or self.settings.steps) | row.settings
        if row.layout is not None and "token_shift" not in row.settings:
            model_cfg, _ = configs(self.settings.preset, row.scheme, layout=row.layout)
            if any(layer.find("shift") for layer in model_cfg.plan):
                out["token_shift"] = 0.0
        return out

    def seed_runs(self) -> list[SeedRun]:
        """Every row on every seed (``seeds``), trained with :meth:`training` at the table's ``preset``."""
        runs_, settings = [], self.settings
        for row in self.rows():
            training = self.training(row)  # once a row: a layout is parsed to see whether it shifts tokens
            runs_ += [SeedRun(row, self.plan.cell(settings.preset, row.scheme, seed, prefix="mix-", layout=row.layout,
                                                  **training))
                      for seed in range(settings.seeds)]
        return runs_

    def cells(self) -> list[Cell]:
        return [run.cell for run in self.seed_runs()]

    def train_len(self) -> int:
        return self.plan.train_len(self.settings.preset)

    def size(self) -> int:
        """The needle size: :data:`SIZE`, lowered until every format fits the training length."""
        return min(fitting_size(TASK, self.train_len(), SIZE, name) for name in FORMATS)

    def configurations(self, run: SeedRun) -> list[Configuration]:
        """The row itself under its patterns, then on the ``rope`` row's seed-0 run (when the study
        runs table E) each no-fine-tune method of table E but plain rope, then each fine-tune."""
        t = self.train_len()
        out = [Configuration(run.row.label, "scheme", None, None, run.row.patterns or tuple(self.plan.patterns(t)))]
        if run.row != RowSpec("rope", "rope") or run.cell.seed != 0 or not self.plan.settings(EXTENSION).on:
            return out
        for m in methods(t, max(MULTIPLES) * t):
            if (m.scheme, m.pattern, m.logn) != ("rope", "causal", False):
                out.append(Configuration(m.label, "method", m.scheme, m.logn, (m.pattern,)))
        out += [Configuration(ft.label, "fine-tune", None, None, ft.patterns) for ft in finetunes(t)]
        return out

    def cache_path(self, key: str, configuration: Configuration) -> Path:
        """Where one configuration's scores are cached: keyed by its run and everything scored,
        what defines the needle documents included (:func:`lexkit.tasks.identity` per format)."""
        what = {"run": key, "scheme": configuration.scheme, "logn": configuration.logn,
                "patterns": configuration.patterns, "task": TASK,
                "documents": [tasks.identity(TASK, f) for f in FORMATS], "formats": FORMATS,
                "size": self.size(), "multiples": MULTIPLES, "bpb": BPB_MULTIPLES, "depths": DEPTHS,
                "samples": self.settings.samples, "docs": self.plan.cfg.eval_docs, "v": VERSION}
        return self.cache.out / "cache" / f"retrieval-{digest(what)}.json"

    def run(self) -> RetrievalSection | None:
        """Train (or find) every run of table G, score every configuration (or read it from the
        cache); None when the table is off or it has no rows."""
        seed_runs = self.seed_runs()
        if not seed_runs:
            return None
        settings, entries = self.settings, []
        for run in seed_runs:
            self.cache.trained(self.cache.run_dir(run.cell), run.cell.model_cfg, run.cell.train_cfg)
            for configuration in self.configurations(run):
                entries += self.entries(run, configuration)
        return RetrievalSection(TASK, self.size(), self.train_len(), settings.preset, settings.steps,
                                RECIPE.batch, RECIPE.lr, RECIPE.mix, settings.seeds, list(MULTIPLES),
                                list(BPB_MULTIPLES), list(DEPTHS), settings.samples,
                                self.plan.settings(EXTENSION).steps, entries,
                                [f for f in FORMATS if needles.get(f).trained],
                                [f for f in FORMATS if not needles.get(f).trained])

    def entries(self, run: SeedRun, configuration: Configuration) -> list[RetrievalEntry]:
        """One configuration scored (a fine-tune trained first), one entry per pattern and format."""
        cell = run.cell
        run_dir, key = self.cache.run_dir(cell), cell.key
        if configuration.kind == "fine-tune":
            ft = next(f for f in finetunes(self.train_len()) if f.label == configuration.label)
            tuned = finetune(self.cache, cell, ft, self.plan.settings(EXTENSION).steps)
            run_dir, key = tuned.run_dir, tuned.key
        scores = self.cache.cached("retrieval", f"{cell.name} {configuration.label}",
                                   self.cache_path(key, configuration), lambda: self.score(run_dir, configuration),
                                   Scores)
        return [RetrievalEntry(configuration.label, configuration.kind, scores.scheme, scores.logn, pattern,
                               str(run_dir.relative_to(self.cache.out)),
                               [r for r in scores.formats[name].rows if r.pattern == pattern],
                               [c for c in scores.formats[name].cells if c.pattern == pattern],
                               cell.seed, name, not needles.get(name).trained, run.row.describe())
                for pattern in scores.patterns for name in FORMATS]

    def score(self, run_dir: Path, configuration: Configuration) -> Scores:
        """One configuration's retrieval cells and bpb in every format of :data:`FORMATS` (exact
        match from the teacher-forced pass, :func:`lexkit.retrieval.score` with ``decode=False``;
        bpb measured once, with the first format, and given to every format's rows)."""
        subject = load(run_dir, device=self.cache.device, scheme=configuration.scheme, logn=configuration.logn)
        patterns = [subject.model.pattern(p).spec for p in configuration.patterns]
        scored, bpb = {}, {}
        for name in FORMATS:
            rows, found = context_rows(subject, configuration.label, task=TASK, multiples=MULTIPLES, patterns=patterns,
                                       depths=DEPTHS, samples=self.settings.samples, size=self.size(),
                                       documents=self.plan.corpus.valid, bpb_multiples=() if bpb else BPB_MULTIPLES,
                                       train_len=self.train_len(), max_docs=self.plan.cfg.eval_docs, decode=False,
                                       progress=self.cache.progress, format=name)
            bpb = bpb or {(r.pattern, r.multiple): r.bpb for r in rows}
            scored[name] = FormatScores([dataclasses.replace(r, bpb=bpb.get((r.pattern, r.multiple))) for r in rows],
                                        found)
        return Scores(subject.describe()["scheme"], bool(subject.config["model"].get("logn", False)), patterns, scored)

    def tasks(self, grid: dict[str, dict], device) -> list[dict]:
        """Table G's tasks for ``--dry-run``, timed on this machine: one training step of its model
        at the recipe's batch (the median of three after a warm-up step) and one token of its
        forward pass at 16x (:meth:`tasks_at`)."""
        seed_runs = self.seed_runs()
        if not seed_runs:
            return []
        n = max(MULTIPLES) * seed_runs[0].cell.model_cfg.train_len
        model, step_s, probe = timed_steps(seed_runs[0].cell, device, n)
        with eval_mode(model), torch.no_grad():
            t0 = time.perf_counter()
            model(probe)
            per_token = (time.perf_counter() - t0) / n
        return self.tasks_at(step_s, per_token)

    def tasks_at(self, per_step: float, per_token: float) -> list[dict]:
        """Each run's training and each configuration's scoring, with seconds scaled from
        ``per_step`` (one training step of table G's model at the recipe's batch) and ``per_token``
        (one token of its forward pass at 16x): the needle documents of every format and the bpb
        documents, under every pattern, and a fine-tune's steps (:func:`..extension.finetune.seconds`)."""
        t, settings = self.train_len(), self.settings
        needles_per = len(DEPTHS) * settings.samples * len(FORMATS)
        tokens = (sum(m * t for m in MULTIPLES) * needles_per
                  + sum(m * t for m in BPB_MULTIPLES) * self.plan.cfg.eval_docs)
        tunes = {ft.label: ft for ft in finetunes(t)}
        out = []
        for run in self.seed_runs():
            exists = (self.cache.run_dir(run.cell) / runs.CHECKPOINT).is_file()
            out.append({"kind": "train", "label": f"{run.row.label} + mix, seed {run.cell.seed}", "run": run.cell.name,
                        "exists": exists, "seconds": per_step * run.cell.train_cfg.steps})
            for configuration in self.configurations(run):
                time_s = per_token * tokens * len(configuration.patterns)
                if configuration.kind == "fine-tune":
                    time_s += seconds(tunes[configuration.label], self.plan.settings(EXTENSION).steps, per_step, t)
                out.append({"kind": configuration.kind, "label": configuration.label,
                            "patterns": len(configuration.patterns), "seconds": time_s})
        return out
