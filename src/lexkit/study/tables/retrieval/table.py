"""Table G, "use of context": does a model that survives a long input also *use* it, and is what
it uses a skill or one format?

Perplexity cannot tell the two apart (a window of W keeps bpb flat at 16x by never looking further
back than W). So the study trains the rows of :data:`ROWS` (one per scheme, and whatever a user or
the lead adds: a layout, a token shift, another step count) with one recipe (that of the study's
preset, :func:`lexkit.study.recipe.for_preset`: the general induction mix of :mod:`lexkit.tasks.needles`'
trained formats, docs/retrieval.md), each on
``--retrieval-seeds`` seeds, and scores copy needles (:mod:`lexkit.retrieval`) at 1, 2, 4, 8 and
16x its training length under every study pattern, in the classic trained format (``tilde``) and
in every held-out format (``python``, ``hex``, ``caret``: never in training), each configuration's
bpb at 1x and 16x beside it, measured paired (:mod:`lexkit.instruments.evaluate.paired`: the same bytes at both, every
window opening on a byte of its document, the 16x / 1x ratio with its interval over documents).
On the ``rope`` row's seed-0 run, the context-extension configurations of table E
(:mod:`lexkit.study.tables.extension`: the scalings at x16, ReRoPE, leaky ReRoPE + log-n, sinks, and
the fine-tunes at 4x, which continue the run with its mix) are scored the same way.

Cached like every study task::

    DIR/runs/mix-<scheme>-s<seed>-<hash>/     a run trained with the recipe
    DIR/runs/mix-rope-s0-<hash>-ft-.../       a table-E fine-tune of the rope row's seed-0 run
    DIR/cache/retrieval-<hash>.json           one configuration's retrieval cells (every format) and bpb

and listed by ``lexkit study --dry-run``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .... import positions, tasks
from ....data.mix import check_mix
from ....instruments.evaluate import paired
from ....instruments.retrieval.context import context_rows
from ....instruments.retrieval.grid import DEFAULT_MULTIPLES
from ....instruments.subject import RunSubject, load
from ....tasks import fitting_size, needles
from ....training import batched, presets, runs, stopping
from ....training.runs.config import overridden
from ....training.settings import configs
from ...plan import DEFAULT_SCHEMES, Bound, Cell, TableSettings, digest, setting_name
from ...recipe import Recipe, for_preset
from ...units import Cost, Unit, training, whole_or_none
from ..extension import finetunes, methods
from ..extension.configurations import Finetune
from ..extension.finetune import finetune, finetuned, trained_key
from ..extension.rows import KEY as EXTENSION
from . import figures, queries, report
from .rows import FINE_TUNE, KEY, METHOD, TRAINED, FormatScores, RetrievalEntry, RetrievalSection, Scores

MULTIPLES = DEFAULT_MULTIPLES  # 1x to 16x the training length
BPB_MULTIPLES = (1, 16)
DEPTHS = (0.0, 25.0, 50.0, 75.0, 100.0)
TASK, SIZE = "copy", 12  # copy values of 12 symbols (lowered to what every format fits at 1x)
#: the needle formats every configuration is scored in: the classic trained one, then the held-out ones
FORMATS = ("tilde", *needles.held_out_formats())
#: bump when the meaning of a cached retrieval score changes (2: every format, seeds; 3: bpb paired, on the same
#: bytes with every window opening on a byte of its document, lexkit.instruments.evaluate.paired, over up to
#: paired.DOCUMENTS; 4: the
#: paired ratio and its interval given to every format's rows, as bpb is)
VERSION = 4
#: what the bpb measured once (with the first format) gives every format's rows of a configuration
BPB_FIELDS = ("bpb", "ratio", "ratio_low", "ratio_high", "documents")


#: table G's uniform rows in a study of the default schemes (with the study's layouts): RoPE (the
#: scheme the context-extension methods stretch) and ALiBi (the bias family the essay reads as a smoothed
#: window); ``make study-full`` runs every scheme's row. The default study's time budget (docs/study.md)
#: has no room for the others' 4,000-step runs.
DEFAULT_ROWS = ("rope", "alibi")
#: the value of ``--retrieval-rows`` that runs every row
EVERY_ROW = "all"
#: copy needles per length, depth and format (``--retrieval-samples``) by the study's preset (None:
#: any other): a first look (``quick``) scores 10, half the needle scoring for intervals about 1.4x
#: as wide (docs/study.md, what each knob costs)
SAMPLES = {None: 20, "quick": 10}


@dataclasses.dataclass
class RetrievalSettings(TableSettings):
    """Table G's settings: ``on`` (``--no-retrieval``); its runs' ``preset``, ``steps`` and ``stop``
    rule (None: the recipe of the study's preset, :func:`lexkit.study.recipe.for_preset`); the needle
    documents per length, depth and format (``samples``); the ``seeds`` of each row; the ``rows`` it
    runs (empty: :data:`DEFAULT_ROWS` and the layouts in a study of the default schemes, else every row;
    ``all``: every row); and whether it scores table E's ``methods`` on the rope row (off by default:
    ``make study-full`` turns it on, with every row on three seeds)."""

    on: bool = dataclasses.field(default=True, metadata={
        "help": "skip table G, use of context (runs trained with a retrieval mix, needles at 1-16x)"})
    steps: int | None = dataclasses.field(default=None, metadata={
        "type": int, "help": "training steps of each run with the retrieval mix in table G, use of context "
        "(default: the recipe of the study's preset, lexkit.study.recipe: 4000 at small, 1000 at quick, "
        "40 at tiny)"})
    preset: str | None = dataclasses.field(default=None, metadata={
        "type": str, "help": "size preset of table G's runs, with the recipe a study at that preset runs "
        "(default: the study's preset's: quick at small and quick, where the recipe was measured)",
        "choices": list(presets.PRESETS)})
    samples: int | None = dataclasses.field(default=None, metadata={
        "type": int, "help": "copy needles per length, depth and format in table G (default: 20; 10 in a study "
        "at the quick preset)"})
    seeds: int = dataclasses.field(default=1, metadata={
        "help": "seeds of each of table G's rows (default: 1; intervals over seeds need 3, make study-full)",
        "maximum": 1000})
    first_seed: int = dataclasses.field(default=0, metadata={
        "new": True, "unset": 0, "minimum": 0, "maximum": 1000,
        "help": "the first of table G's seeds (default: 0): seeds first_seed .. first_seed + seeds - 1, so that "
        "seeds trained elsewhere need not be trained again (a seed's run is the same whichever sweep trains it)"})
    stop: str | None = dataclasses.field(default=None, metadata={
        "type": str, "new": True, "unset": "",
        "help": "stop rule of table G's runs, probe:exact=E,probes=K,after=S (lexkit.training.stopping), or off "
        "(default: the recipe's: probe:exact=0.9,probes=5,after=2000 at small, none at quick and tiny)"})
    rows: list[str] = dataclasses.field(default_factory=list, metadata={
        "new": True, "unset": [], "metavar": "LABEL",
        "help": "a row of table G to run, by its label (a scheme or a layout as given), or all; repeatable "
        f"(default: in a study of the default schemes {', '.join(DEFAULT_ROWS)} and the study's layouts, "
        "else every row; make study-full: all)"})
    docs: int = dataclasses.field(default=paired.DOCUMENTS, metadata={
        "new": True, "unset": paired.DOCUMENTS,  # every study before the setting read this many
        "help": f"validation documents of table G's bpb, at most (the paired measure: the same bytes at 1x and 16x, "
        f"an interval over documents; default: {paired.DOCUMENTS}, fewer where fewer are long enough)"})
    methods: bool = dataclasses.field(default=False, metadata={
        "new": True, "unset": True,  # a results.json written before the setting scored them
        "help": "also score table E's methods and fine-tunes on table G's rope row (make study-full does)"})
    batch_seeds: bool = dataclasses.field(default=False, metadata={
        "new": True, "unset": False,
        "help": "train each of table G's rows' seeds as one batched model (lexkit.training.batched: equal to training "
        "them one by one within float32 noise; slower on one CPU thread at table G's size, docs/benchmarks.md); "
        "a row that cannot be batched trains seed by seed"})

    def seed_list(self) -> range:
        """The seeds each row trains on: ``seeds`` of them from ``first_seed``."""
        return range(self.first_seed, self.first_seed + self.seeds)

    def check(self, key: str, *, flags: bool = False) -> None:
        super().check(key, flags=flags)
        if self.stop is not None:
            try:
                stopping.parse(self.stop)
            except ValueError as exc:
                raise ValueError(f"{setting_name(key, 'stop', flag=flags)}: {exc}") from None

    def recipe(self, study_preset: str) -> Recipe:
        """The recipe G's runs train with in a study at ``study_preset``: that of ``preset`` (else
        the study's, :func:`~lexkit.study.recipe.for_preset`), with these ``steps`` and ``stop``."""
        recipe = for_preset(self.preset or study_preset)
        stop = recipe.stop if self.stop is None else stopping.canonical(self.stop)
        return dataclasses.replace(recipe, steps=self.steps or recipe.steps, stop=stop)

    def needles(self, study_preset: str) -> int:
        """The copy needles per length, depth and format a study at ``study_preset`` scores:
        ``samples``, else :data:`SAMPLES`' for that preset."""
        return self.samples or SAMPLES.get(study_preset, SAMPLES[None])

    def resolved(self, cfg) -> RetrievalSettings:
        """The preset, steps, stop rule and needles as a study of ``cfg`` runs them (:meth:`recipe`,
        :meth:`needles`)."""
        recipe = self.recipe(cfg.preset)
        return dataclasses.replace(self, preset=recipe.preset, steps=recipe.steps, stop=recipe.stop,
                                   samples=self.needles(cfg.preset))


@dataclasses.dataclass(frozen=True)
class RowSpec:
    """What one row of table G trains, with the table's recipe on every seed: ``scheme`` (with a
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
    """What table G scores on one of its runs (its ``origin``, :data:`.rows.ORIGINS`): the run as
    trained (``"trained"``, a scheme's or a layout's), one of table E's methods on its weights
    (``"method"``: the ``scheme`` and ``logn`` they run under; None: as trained), or a fine-tune of it
    (``"fine-tune"``), under ``patterns``."""

    label: str
    origin: str  # "trained", "method" or "fine-tune"
    scheme: str | None  # None: as trained
    logn: bool | None
    patterns: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class SeedRun:
    """One row of table G on one seed: its spec and the study cell that trains it."""

    row: RowSpec
    cell: Cell


class RetrievalTable(Bound):
    """Table G (a :class:`~lexkit.study.plan.StudyTable`), run by the study's plan and cache."""

    key, Settings, row = KEY, RetrievalSettings, RetrievalSection
    blocks, figures, scalars = staticmethod(report.blocks), figures.FIGURES, staticmethod(queries.scalars)
    #: how an error names a row that cannot train
    row_name = "table G's row"

    def recipe(self) -> Recipe:
        """The recipe this table's runs train with (:meth:`RetrievalSettings.recipe`)."""
        return self.settings.recipe(self.plan.cfg.preset)

    def every_row(self) -> list[RowSpec]:
        """The rows this study may run, in order: those of :data:`ROWS` whose scheme the study studies
        (a row of :data:`ROWS` with a layout always), then one row per layout of the study
        (``--layout``, :data:`~lexkit.study.plan.DEFAULT_LAYOUTS`), labelled as given."""
        studied = set(self.plan.cfg.schemes)
        out = [r for r in ROWS if r.layout is not None or positions.canonical(r.scheme) in studied]
        return out + [RowSpec(spec, "rope", layout=spec) for spec in self.plan.cfg.layouts
                      if spec not in {r.label for r in out}]

    def rows(self) -> list[RowSpec]:
        """The rows this study runs (none: the table is off): :meth:`every_row`, or those of them
        ``rows`` names (``--retrieval-rows``; a label that is no row is a ValueError naming the rows)."""
        if not self.settings.on:
            return []
        out = self.every_row()
        chosen = self.settings.rows
        if not chosen and self.plan.cfg.schemes == DEFAULT_SCHEMES:
            chosen = [*DEFAULT_ROWS, *self.plan.cfg.layouts]
        if not chosen or chosen == [EVERY_ROW]:
            return out
        labels = [r.label for r in out]
        unknown = [label for label in chosen if label not in labels]
        if unknown:
            raise ValueError(f"--retrieval-rows {unknown[0]!r} is not a row of table G in this study; its rows: "
                             f"{', '.join(labels) or 'none'}")
        return [r for r in out if r.label in chosen]

    def training(self, row: RowSpec) -> dict[str, Any]:
        """How ``row`` trains: the recipe's settings for its steps, then the row's own; a layout
        that shifts tokens itself (``+shift``, ``shift=F``) takes no recipe token shift besides."""
        recipe = self.recipe()
        out = recipe.settings(row.steps or recipe.steps) | row.settings
        if row.layout is not None and "token_shift" not in row.settings:
            given = {k: v for k, v in out.items() if k != "token_shift"}  # the row's own n_layers among them
            model_cfg, _ = configs(recipe.preset, row.scheme, layout=row.layout, **given)
            if model_cfg.stack.shifts_tokens:
                out["token_shift"] = 0.0
        return out

    def seed_runs(self) -> list[SeedRun]:
        """Every row on every seed (``seeds``), trained with :meth:`training` at the recipe's preset."""
        runs_, preset, trains = [], self.recipe().preset, {}
        for row in self.rows():
            try:
                training = self.training(row)  # once a row: a layout is parsed to see whether it shifts tokens
                check_mix(training.get("mix"), self.train_len())
                prefix = "mix-" if training.get("mix") else "nomix-"  # a sweep arm's "mix": "" trains none
                row_runs = [SeedRun(row, self.plan.cell(preset, row.scheme, seed, prefix=prefix, layout=row.layout,
                                                        **training))
                            for seed in self.settings.seed_list()]
            except ValueError as exc:
                raise ValueError(f"{self.row_name} {row.label!r}: {exc}") from None
            twin = trains.setdefault(row_runs[0].cell.key, row)
            if twin is not row:
                raise ValueError(f"{self.row_name}s {twin.label!r} and {row.label!r} train the same run (one model, "
                                 "its layout read as its canonical layer stack, and the same resolved settings): keep "
                                 "one of them, or change what one of them trains")
            runs_ += row_runs
        return runs_

    def cells(self) -> list[Cell]:
        return [run.cell for run in self.seed_runs()]

    def batched_groups(self, seed_runs: list[SeedRun]) -> dict[str, list[Cell]]:
        """{a cell's name: the cells of its row that train with it as one batched model
        (:mod:`lexkit.training.batched`),
        the row's first seed first} for every row whose seeds do, when ``batch_seeds`` is on: a row of
        one seed, or whose settings cannot be batched (:func:`lexkit.training.batched.refusal`), trains seed by seed."""
        if not self.settings.batch_seeds:
            return {}
        rows: dict[int, list[Cell]] = {}
        for run in seed_runs:
            rows.setdefault(id(run.row), []).append(run.cell)
        return {cell.name: cells for cells in rows.values() if len(cells) > 1
                and batched.refusal(cells[0].model_cfg, [c.train_cfg for c in cells]) is None for cell in cells}

    def train_len(self) -> int:
        return self.plan.train_len(self.recipe().preset)

    def finetune_steps(self) -> int:
        """Steps of table E's fine-tunes, which ``--retrieval-methods`` scores on the rope row."""
        return self.plan.settings(EXTENSION).finetune_steps(self.plan.cfg.preset)

    def samples(self) -> int:
        """Copy needles per length, depth and format (:meth:`RetrievalSettings.needles`)."""
        return self.settings.needles(self.plan.cfg.preset)

    def size(self) -> int:
        """The needle size: :data:`SIZE`, lowered until every format fits the training length."""
        return min(fitting_size(TASK, self.train_len(), SIZE, name) for name in FORMATS)

    def configurations(self, run: SeedRun) -> list[Configuration]:
        """The row itself under its patterns, then on the ``rope`` row's first seed's run (seed 0; when the study
        runs table E and ``methods`` is on) each no-fine-tune method of table E but plain rope, then
        each fine-tune."""
        t = self.train_len()
        out = [Configuration(run.row.label, TRAINED, None, None, run.row.patterns or tuple(self.plan.patterns(t)))]
        if (run.row != RowSpec("rope", "rope") or run.cell.seed != self.settings.first_seed
                or not self.plan.settings(EXTENSION).on or not self.settings.methods):
            return out
        for m in methods(t, max(MULTIPLES) * t):
            if (m.scheme, m.pattern, m.logn) != ("rope", "causal", False):
                out.append(Configuration(m.label, METHOD, m.scheme, m.logn, (m.pattern,)))
        out += [Configuration(ft.label, FINE_TUNE, None, None, ft.patterns)
                for ft in self.plan.settings(EXTENSION).finetunes(t, self.plan.cfg.preset)]
        return out

    def cache_path(self, key: str, configuration: Configuration) -> Path:
        """Where one configuration's scores are cached: keyed by its run and everything scored,
        what defines the needle documents included (:func:`lexkit.tasks.identity` per format)."""
        what = {"run": key, "scheme": configuration.scheme, "logn": configuration.logn,
                "patterns": configuration.patterns, "task": TASK,
                "documents": [tasks.identity(TASK, f) for f in FORMATS], "formats": FORMATS,
                "size": self.size(), "multiples": MULTIPLES, "bpb": BPB_MULTIPLES, "depths": DEPTHS,
                "samples": self.samples(), "docs": self.settings.docs, "v": VERSION}
        return self.cache.out / "cache" / f"retrieval-{digest(what)}.json"

    def run(self) -> RetrievalSection | None:
        """Train (or find) every run of table G, score every configuration (or read it from the
        cache); None when the table is off or it has no rows."""
        seed_runs = self.seed_runs()
        if not seed_runs:
            return None
        settings, recipe, entries = self.settings, self.recipe(), []
        for run in seed_runs:
            self.cache.trained(self.cache.run_dir(run.cell), run.cell.model_cfg, run.cell.train_cfg)
            for configuration in self.configurations(run):
                entries += self.entries(run, configuration)
        return RetrievalSection(TASK, self.size(), self.train_len(), recipe.preset, recipe.steps,
                                recipe.batch, recipe.lr, recipe.mix, settings.seeds, list(MULTIPLES),
                                list(BPB_MULTIPLES), list(DEPTHS), self.samples(),
                                self.finetune_steps(), entries,
                                [f for f in FORMATS if needles.get(f).trained],
                                [f for f in FORMATS if not needles.get(f).trained])

    def entries(self, run: SeedRun, configuration: Configuration) -> list[RetrievalEntry]:
        """One configuration scored (a fine-tune trained first), one entry per pattern and format."""
        cell = run.cell
        run_dir, key = self.cache.run_dir(cell), cell.key
        if configuration.origin == FINE_TUNE:
            tuned = finetune(self.cache, cell, self.finetune_of(configuration), self.finetune_steps())
            run_dir, key = tuned.run_dir, tuned.key
        scores = self.cache.cached("retrieval", f"{cell.name} {configuration.label}",
                                   self.cache_path(key, configuration), lambda: self.score(run_dir, configuration),
                                   Scores)
        return [RetrievalEntry(configuration.label, configuration.origin, scores.scheme, scores.logn, pattern,
                               str(run_dir.relative_to(self.cache.out)),
                               [r for r in scores.formats[name].rows if r.pattern == pattern],
                               [c for c in scores.formats[name].cells if c.pattern == pattern],
                               cell.seed, name, not needles.get(name).trained, run.row.describe())
                for pattern in scores.patterns for name in FORMATS]

    def score(self, run_dir: Path, configuration: Configuration) -> Scores:
        """One configuration's retrieval cells and bpb in every format of :data:`FORMATS`
        (:meth:`scored` on the run loaded as the configuration runs)."""
        subject = load(run_dir, device=self.cache.device, scheme=configuration.scheme, logn=configuration.logn)
        return self.scored(subject, configuration)

    def scored(self, subject, configuration: Configuration, *, samples: int | None = None,
               formats: tuple[str, ...] = FORMATS, bpb: bool = True, progress: bool | None = None) -> Scores:
        """A subject's retrieval cells and bpb in each of ``formats`` (exact match from the
        teacher-forced pass, :func:`lexkit.retrieval.score` with ``decode=False``; bpb measured
        once, with the first format, and given to every format's rows; none without ``bpb``),
        ``samples`` needles per cell (default: the table's). The estimate times this on a fresh
        model with one needle per cell and one format (:meth:`scoring_cost`)."""
        patterns = [subject.model.pattern(p).spec for p in configuration.patterns]
        scored, measured = {}, {}
        for name in formats:
            rows, found = context_rows(subject, configuration.label, task=TASK, multiples=MULTIPLES, patterns=patterns,
                                       depths=DEPTHS, samples=samples or self.samples(), size=self.size(),
                                       documents=self.plan.corpus.valid,
                                       bpb_multiples=BPB_MULTIPLES if bpb and not measured else (),
                                       train_len=self.train_len(), max_docs=self.settings.docs, decode=False,
                                       progress=self.cache.progress if progress is None else progress,
                                       format=name)
            measured = measured or {(r.pattern, r.multiple): {k: getattr(r, k) for k in BPB_FIELDS} for r in rows}
            scored[name] = FormatScores([dataclasses.replace(r, **measured.get((r.pattern, r.multiple), {}))
                                         for r in rows], found)
        return Scores(subject.describe()["label"], bool(subject.config["model"].get("logn", False)), patterns, scored)

    # -- its work, as units of the study (the workers, the dry run) ----------------------------------------
    def units(self) -> list[Unit]:
        """Each run's training, then each configuration's scoring (a fine-tune's training with it),
        each needing its run trained."""
        out, seed_runs = [], self.seed_runs()
        groups = self.batched_groups(seed_runs)
        for run in seed_runs:
            cell, recipe = run.cell, self.recipe()
            train = f"train {cell.name}"
            together = groups.get(cell.name)  # the row's seeds its first seed's unit trains as one model
            needs = (f"train {together[0].name}",) if together and together[0] is not cell else ()
            work = (lambda cs=together: self.cache.trained_together([self.cache.run_dir(c) for c in cs], cs)) \
                if together and together[0] is cell else \
                (lambda c=cell: self.cache.trained(self.cache.run_dir(c), c.model_cfg, c.train_cfg))
            mixed = f"{run.row.label} + mix" if cell.train_cfg.mix else f"{run.row.label}, no mix"
            out.append(Unit(train, "train", f"{mixed}, seed {cell.seed}", KEY, work,
                            lambda timer, c=cell: self.training_cost(timer, c), needs,
                            done=lambda c=cell: runs.finished(runs.trainer_state(self.cache.run_dir(c)),
                                                              c.train_cfg.steps),
                            info={"seed": cell.seed, "run": cell.name, "steps": cell.train_cfg.steps,
                                  "stop": recipe.stop}))
            for configuration in self.configurations(run):
                out.append(Unit(f"score {cell.name} {configuration.label}", "score",
                                configuration.label, KEY, lambda r=run, c=configuration: self.entries(r, c),
                                lambda timer, r=run, c=configuration: self.scoring_cost(timer, r, c), (train,),
                                lambda r=run, c=configuration: self.scored_done(r, c),
                                {"seed": cell.seed, "patterns": len(configuration.patterns)}))
        return out

    def training_cost(self, timer, cell: Cell) -> Cost:
        """A run's steps (from its checkpoint on), timed at its model and batch; with a stop rule,
        the least it may take besides."""
        rule = stopping.parse(cell.train_cfg.stop)
        return training(timer.step(cell.model_cfg, cell.train_cfg), cell.train_cfg.steps,
                        runs.trainer_state(self.cache.run_dir(cell)), None if rule is None else rule.after)

    def scoring_cost(self, timer, run: SeedRun, configuration: Configuration) -> Cost:
        """One configuration's scoring, timed by :meth:`scored` itself on a fresh model as the
        configuration runs (its scheme and log-n: a ReRoPE scoring times ReRoPE's scores path) with
        one needle per cell in one format, scaled to the table's needles and formats, and its bpb
        documents (:meth:`lexkit.study.estimate.Timer.evaluation`); a fine-tune's steps besides."""
        cell, t, train = run.cell, self.train_len(), 0.0
        if configuration.origin == FINE_TUNE:
            model_cfg, train_cfg = finetuned(cell.model_cfg, cell.train_cfg, self.finetune_of(configuration),
                                             self.finetune_steps())
            train = timer.step(model_cfg, train_cfg) * train_cfg.steps
        else:
            model_cfg = overridden(cell.model_cfg, configuration.scheme, configuration.logn)
        key = ("score", model_cfg.identity(), configuration.patterns, t, self.size(), str(timer.device))
        needle = timer.measured(key, lambda: self.scored(RunSubject.of(timer.model(model_cfg)), configuration,
                                                         samples=1, formats=FORMATS[:1], bpb=False,
                                                         progress=False))
        bpb = timer.evaluation(model_cfg, self.plan.corpus.valid, [m * t for m in BPB_MULTIPLES],
                               list(configuration.patterns), train_len=t)
        score = needle * self.samples() * len(FORMATS) + bpb * self.bpb_documents()
        return whole_or_none(train + score, self.scored_done(run, configuration), train_s=train, eval_s=score)

    def bpb_documents(self) -> int:
        """The validation documents the paired bpb reads: those of at least 16x + 1 bytes, at most
        the table's ``docs`` (:data:`lexkit.instruments.evaluate.paired.DOCUMENTS`)."""
        need = max(BPB_MULTIPLES) * self.train_len() + 1
        return min(self.settings.docs, sum(len(d) >= need for d in self.plan.corpus.valid))

    def scored_done(self, run: SeedRun, configuration: Configuration) -> bool:
        """Whether a configuration's scores are cached (a fine-tune's: once its parent is trained, its
        key reads it)."""
        key = run.cell.key
        if configuration.origin == FINE_TUNE:
            steps = self.finetune_steps()
            key = trained_key(self.cache, run.cell, self.finetune_of(configuration), steps)
            if key is None:
                return False
        return self.cache_path(key, configuration).is_file()

    def finetune_of(self, configuration: Configuration) -> Finetune:
        """Table E's fine-tune a ``fine-tune`` configuration scores (by its label)."""
        return next(ft for ft in finetunes(self.train_len()) if ft.label == configuration.label)
