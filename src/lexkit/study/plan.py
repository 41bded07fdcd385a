"""The study's plan: its configuration, its cells (one training run per row of its grid and seed),
the lengths and patterns it evaluates, and the cache keys of every cell's work (a hash of its full
config, so a change of any setting computes anew and nothing else); and the one interface of the
tables it runs beside its grid (:class:`Table`, with its settings, :class:`TableSettings`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol

from .. import positions, tasks
from ..attention import create as create_pattern
from ..core import checks, options
from ..data.corpus import Corpus, load_corpus
from ..data.mix import parse_mix
from ..documents.blocks import Block
from ..documents.rows import Row
from ..instruments.evaluate.measure import default_lengths, select_documents
from ..layouts import check_pattern
from ..training.settings import configs
from .schema import SCHEMA, TABLES, StudyResults

DEFAULT_SCHEMES = [
    "none", "sinusoidal", "rope", "xpos", "xpos:rotate=false", "alibi", "kerple-log", "kerple-power", "sandwich",
]
#: layouts beside the schemes, in the grid (tables A-D) and as rows of table G (docs/layouts.md): HWFA (RoPE window
#: layers under one full NoPE layer with log-n) with token shift at W = 16, the layout nearest the goal in the layout
#: measurements, and the hunt's pick (docs/hunt.md, by its pre-registered rule: trained-format exact match at 16x on
#: three seeds): the same two layers with FoX's key/value shift on the global one (on the grid's 4 layers the pair
#: repeats: local, global, local, global)
DEFAULT_LAYOUTS: list[str] = ["hwfa:W=16,shift=0.5", "rope@window:16+shift;none@causal+logn+shift+kshift"]
DEFAULT_PATTERNS = ["causal", "window", "bca"]
#: the version of results.json a study writes (:data:`lexkit.study.schema.SCHEMA`)
SCHEMA_VERSION = SCHEMA
#: bump when the meaning of a cached evaluation changes (invalidates eval/resolution caches)
EVAL_VERSION = 1


@dataclasses.dataclass
class TableSettings:
    """The settings of a table beside the grid: ``on``, whether the study runs it, and the fields of
    the table's own subclass. Each is also a keyword of :class:`StudyConfig` and a flag of ``lexkit
    study`` (:func:`setting_name`): for the table ``retrieval``, ``retrieval=False`` /
    ``--no-retrieval`` sets ``on`` and ``retrieval_seeds=1`` / ``--retrieval-seeds 1`` the field
    ``seeds``. A field's metadata is :mod:`lexkit.core.options`' (its flag's ``help``, ``maximum``,
    ``minimum``, ``choices``, which :meth:`check` enforces, and ``type`` for a field whose default is
    None, meaning: the table chooses, :meth:`resolved`). A field marked ``new`` (added since results.json's
    schema 2) is written to results.json only when its value is not its ``unset`` one, so a study
    that leaves it alone writes the config it wrote before."""

    on: bool = True

    def check(self, key: str, *, flags: bool = False) -> None:
        """A ValueError naming the setting (as a keyword, or as a flag) of the first value out of range:
        an integer that is not positive or above its ``maximum``, a value not among its ``choices``
        (:func:`lexkit.core.options.check`; a None default is the table's own choice)."""
        options.check(self, lambda field: setting_name(key, field, flag=flags))

    def resolved(self, cfg: StudyConfig) -> TableSettings:
        """These settings with every value the table chooses (a None default) filled in as it runs
        in a study of ``cfg`` (itself by default)."""
        return self

    def recorded(self, cfg: StudyConfig) -> dict:
        """The settings as results.json keeps them (:meth:`resolved`; a ``new`` field at its
        ``unset`` value left out)."""
        values = dataclasses.asdict(self.resolved(cfg))
        return {field.name: values[field.name] for field in dataclasses.fields(self)
                if not (field.metadata.get("new") and values[field.name] == field.metadata.get("unset"))}


def setting_name(key: str, field: str, *, flag: bool = False) -> str:
    """How a user names the setting ``field`` of the table ``key``: StudyConfig's keyword (``key`` for
    ``on``, else ``key_field``) or ``lexkit study``'s flag (``--no-key``, ``--key-field``)."""
    if flag:
        return f"--no-{key}" if field == "on" else f"--{key}-{field}".replace("_", "-")
    return key if field == "on" else f"{key}_{field}"


@dataclasses.dataclass(init=False)
class StudyConfig:
    """What a study runs: its grid (the fields up to ``threads``) and, in ``tables``, each table's
    settings by its key (:class:`TableSettings`; a table not given takes its defaults). Built from
    keywords alone; every table setting is also a keyword of its own (:func:`setting_name`:
    ``StudyConfig(extension=False, retrieval_seeds=1)``), as ``lexkit study``'s flags are."""

    preset: str = "small"
    schemes: list[str] = dataclasses.field(default_factory=lambda: list(DEFAULT_SCHEMES))
    #: None: :data:`DEFAULT_LAYOUTS` when ``schemes`` is the default set, else none (as ``lexkit study``)
    layouts: list[str] | None = None
    patterns: list[str] = dataclasses.field(default_factory=lambda: list(DEFAULT_PATTERNS))
    lengths: list[int] | None = None  # default: the training length x 1/2, 1, 2, 4, 8, 16
    seeds: int = 1
    data: str = "stdlib"
    steps: int | None = None  # override the preset's training steps
    eval_docs: int = 24  # validation documents per length (bytes scored = eval_docs x max(lengths))
    resolution_texts: int = 4
    device: str = "auto"
    threads: int | None = None
    #: every training run's step compiled (TrainConfig.compile; None: the device's default). How the
    #: runs train, not what: not in a cell's key, and results.json keeps it only when given
    compile: bool | None = None
    tables: dict[str, TableSettings] = dataclasses.field(default_factory=dict)

    def __init__(self, **settings: Any) -> None:
        for field in dataclasses.fields(self):
            if field.name in settings:
                setattr(self, field.name, settings.pop(field.name))
            else:
                setattr(self, field.name, field.default if field.default_factory is dataclasses.MISSING
                        else field.default_factory())
        self.tables = table_settings(self.tables, settings)
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.layouts is None:
            self.layouts = list(DEFAULT_LAYOUTS) if self.schemes == DEFAULT_SCHEMES else []
        if not self.schemes and not self.layouts:
            raise ValueError("a study needs at least one --scheme or --layout")
        if not self.patterns:
            raise ValueError("a study needs at least one --pattern")
        self.schemes = unique([positions.canonical(s) for s in self.schemes])
        self.layouts = unique([spec.strip() for spec in self.layouts])
        for spec in self.layouts:  # checked at the grid's model size now
            configs(self.preset, "rope", layout=spec)
        for p in self.patterns:  # validate now (W resolved per model later)
            check_pattern(p)
        checks.number("--seeds", self.seeds, maximum=1000)
        for key in ("eval_docs", "resolution_texts"):
            checks.number(key, getattr(self, key))
        for key, table in self.tables.items():
            table.check(key)

    def to_json(self) -> dict[str, Any]:
        """The configuration as results.json keeps it: the grid's fields, then every table's settings
        by their keywords (``extension``, ``extension_steps``, ``retrieval``, ...), as the study runs
        them (:meth:`TableSettings.recorded`)."""
        out = dataclasses.asdict(self)
        del out["tables"]
        if out["compile"] is None:  # a study that does not say: results.json as before the setting
            del out["compile"]
        for key, table in self.tables.items():
            out.update({setting_name(key, name): value for name, value in table.recorded(self).items()})
        return out


def table_settings(given: dict[str, TableSettings], keywords: dict[str, Any]) -> dict[str, TableSettings]:
    """Every registered table's settings (:data:`lexkit.study.schema.TABLES`): as ``given``, else its
    defaults, with the ``keywords`` that name its settings applied (:func:`setting_name`); a keyword
    no table has is a TypeError, as for any constructor."""
    kinds = {table.key: table.Settings for table in TABLES}
    unknown = set(given) - set(kinds)
    if unknown:
        raise ValueError(f"no table {sorted(unknown)[0]!r} (tables: {', '.join(kinds)})")
    out = {}
    for key, kind in kinds.items():
        names = {setting_name(key, field.name): field.name for field in dataclasses.fields(kind)}
        mine = {names[k]: keywords.pop(k) for k in list(keywords) if k in names}
        out[key] = dataclasses.replace(given.get(key) or kind(), **mine)
    if keywords:
        raise TypeError(f"StudyConfig() got an unexpected keyword argument {next(iter(keywords))!r}")
    return out


def entries(cfg: StudyConfig) -> list[str]:
    """The labels of the rows of the study's grid, in order: its schemes, then its layouts."""
    return [*cfg.schemes, *cfg.layouts]


def unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def legacy_key(model_cfg, train_cfg) -> dict:
    """The parts of a cell's key as lexkit wrote them before keys were canonical: the layout as typed
    and the training settings as given (a run trained then is found under them, :meth:`Plan.stored`)."""
    return {"model": {**dataclasses.asdict(model_cfg), "resolved": model_cfg.resolved()},
            "train": train_cfg.recorded()}


def slug(spec: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in spec)


@dataclasses.dataclass
class Cell:
    """One training run of the study: a row of its grid or of a table (``label``: a scheme spec, or a
    layout as given) and a seed."""

    label: str
    seed: int
    model_cfg: Any
    train_cfg: Any
    key: str
    prefix: str = ""  # "mix-": a run of table G, trained with the retrieval mix
    #: the directory it is stored in when another spelling of the same run trained it (:meth:`Plan.cell`)
    stored: str | None = None

    @property
    def name(self) -> str:
        return self.stored or f"{self.prefix}{slug(self.label)}-s{self.seed}-{self.key}"


def cell_unit(cell: Cell) -> str:
    """The name of the unit of work that trains and measures a cell of the grid."""
    return f"cell {cell.name}"


class Plan:
    """What a study runs, derived from its :class:`StudyConfig` alone: its cells, lengths and
    patterns, and the keys its work is cached under. The corpus is loaded on first use."""

    def __init__(self, cfg: StudyConfig, runs: Path | None = None) -> None:
        self.cfg = cfg
        self.runs = runs  # where the study keeps its runs: a cell trained under another spelling is found there
        self._corpus: Corpus | None = None
        self._eval_documents: int | None = None

    @property
    def corpus(self) -> Corpus:
        if self._corpus is None:
            self._corpus = load_corpus(self.cfg.data)
        return self._corpus

    def settings(self, key: str) -> TableSettings:
        """The settings of the table ``key`` (:attr:`StudyConfig.tables`)."""
        return self.cfg.tables[key]

    def cell(self, preset: str, label: str, seed: int, prefix: str = "", **settings) -> Cell:
        """One training run of ``label`` (a scheme spec, or one of the study's layouts) at ``preset``
        with ``settings``, keyed by what it trains: its model's identity (the layout's canonical layer stack,
        not its spelling: :meth:`lexkit.model.gpt.ModelConfig.identity`), its training settings resolved
        (:meth:`lexkit.training.settings.TrainConfig.canonical`: a default given explicitly trains the same
        run), the corpus and, for a run with a retrieval mix, what defines its tasks' documents
        (:func:`lexkit.tasks.identity`: a new derivation trains it anew). A layout's cell is labelled
        with the layout as given. In the study's ``runs`` it is the run another spelling of it trained
        (a directory of the same key), or the one a lexkit before canonical keys trained under this
        spelling (:func:`legacy_key`), before a new one."""
        if label in self.cfg.layouts:
            settings = {"layout": label, **settings}
        model_cfg, given = configs(preset, "rope" if label in self.cfg.layouts else label, seed=seed,
                                   data=self.cfg.data, **settings)
        train_cfg = given.canonical()
        key = {"model": model_cfg.identity(), "train": train_cfg.recorded(), "data": self.corpus.fingerprint}
        if train_cfg.mix:
            key["tasks"] = [tasks.identity(task) for task in parse_mix(train_cfg.mix)]
        cell = Cell(model_cfg.label, seed, model_cfg, train_cfg, digest(key), prefix)
        return self.stored(cell, digest(key | legacy_key(model_cfg, given)))

    def stored(self, cell: Cell, legacy: str) -> Cell:
        """``cell`` as the study's ``runs`` hold it: under its own name, else the directory of its key
        another spelling trained, else under its ``legacy`` key (the same spelling, trained before keys
        were canonical: the key its scores are cached under too), else its own name (not trained yet)."""
        if self.runs is None or (self.runs / cell.name).is_dir():
            return cell
        same = sorted(path.name for path in self.runs.glob(f"{cell.prefix}*-s{cell.seed}-{cell.key}") if path.is_dir())
        if same:
            return dataclasses.replace(cell, stored=same[0])
        old = dataclasses.replace(cell, key=legacy)
        return old if legacy != cell.key and (self.runs / old.name).is_dir() else cell

    def cells(self) -> list[Cell]:
        """The main grid's training runs: every scheme, every seed."""
        return [self.cell(self.cfg.preset, spec, seed, steps=self.cfg.steps)
                for spec in entries(self.cfg) for seed in range(self.cfg.seeds)]

    def eval_documents(self) -> int:
        """How many validation documents an evaluation scores per length: ``eval_docs``, or fewer
        where fewer are long enough for the longest length (:func:`lexkit.evaluate.select_documents`:
        ``eval_docs: 100000000`` scores them all, and the estimate counts those, not 10^8)."""
        if self._eval_documents is None:  # asked by every cell's and method's cost: selected once
            self._eval_documents = len(select_documents(self.corpus.valid, max(self.lengths()),
                                                        max_docs=self.cfg.eval_docs))
        return self._eval_documents

    def train_len(self, preset: str | None = None) -> int:
        """The training length of the study's preset (or of ``preset``)."""
        return configs(preset or self.cfg.preset, "none")[0].train_len

    def lengths(self) -> list[int]:
        return sorted(set(self.cfg.lengths)) if self.cfg.lengths else default_lengths(self.train_len())

    def resolution_lengths(self) -> list[int]:
        t = self.train_len()
        return sorted({n for n in (t, 2 * t, 4 * t, max(self.lengths())) if n <= max(self.lengths())} | {t})

    def patterns(self, train_len: int | None = None) -> list[str]:
        """The study's patterns resolved for a model trained at ``train_len`` (default: the study's)."""
        t = train_len or self.train_len()
        return unique([create_pattern(p, default_window=t).spec for p in self.cfg.patterns])

    def cache_paths(self, out: Path, cell: Cell) -> dict[str, Path]:
        """Where a cell's evaluation, empirical resolution and principles are cached in the study ``out``."""
        eval_key = digest({"run": cell.key, "lengths": self.lengths(), "patterns": self.patterns(),
                           "docs": self.cfg.eval_docs, "v": EVAL_VERSION})
        res_key = digest({"run": cell.key, "lengths": self.resolution_lengths(), "patterns": self.patterns(),
                          "texts": self.cfg.resolution_texts, "v": EVAL_VERSION})
        pr_key = digest({"run": cell.key, "v": EVAL_VERSION})
        cache = out / "cache"
        return {"eval": cache / f"eval-{eval_key}.json", "resolution": cache / f"resolution-{res_key}.json",
                "principles": cache / f"principles-{pr_key}.json"}

    def shape(self) -> dict:
        """The study's model shape, as the resolution instrument takes it (initial values under
        seed 0, the random state of the process untouched)."""
        cfg = self.cells()[0].model_cfg
        return {"heads": cfg.n_heads, "head_dim": cfg.head_dim, "seed": 0, "max_len": cfg.position_len}


class Section(Protocol):
    """What the study runs of a table beside its grid, bound to the study's :class:`Plan` and cache:
    ``key``, the section of results.json it fills; :meth:`run`, that section (None when the table is
    off), computed through the cache (read back when its work is done); and its work, either
    ``units()``, a list of :class:`lexkit.study.units.Unit` the study shares out over its workers
    and times for ``--dry-run`` (tables E and G), or, for a table without it, one unit that runs
    :meth:`run` after the grid, timed by ``tasks(grid, device)``: each task with its estimated
    ``seconds`` (``grid``: the grid's measured ``train_s``/``eval_s`` per row label)."""

    key: str

    def run(self) -> Row | None: ...


class Bound:
    """What every table beside the grid does alike (a base of each :class:`StudyTable`): it is bound to
    the study's :class:`Plan` and cache, and reads its settings (``settings``) from the plan by its ``key``."""

    key: ClassVar[str]

    def __init__(self, plan: Plan, cache: Any) -> None:
        self.plan, self.cache = plan, cache

    @property
    def settings(self) -> Any:
        return self.plan.settings(self.key)


class StudyTable(Section, Protocol):
    """A table beside the grid (E, context extension; G, use of context; one folder each in
    :mod:`lexkit.study.tables`): the :class:`Section` the study runs (``StudyTable(plan, cache)``), and
    what it is without a model, from results.json alone: its ``Settings`` (a :class:`TableSettings`),
    ``row``, the row type of its section of results.json (:meth:`lexkit.study.schema.StudyResults.table`),
    :meth:`blocks`, its sections of the report, ``figures``, its figures (file name ->
    ``draw(results, path)``, drawing nothing when there is nothing to draw), and :meth:`scalars`,
    what TensorBoard shows of it (configuration -> (quantity, pattern) -> length -> value)."""

    Settings: ClassVar[type[TableSettings]]
    row: ClassVar[type[Row]]
    figures: ClassVar[dict[str, Callable[[StudyResults, Any], None]]]

    def __init__(self, plan: Plan, cache: Any) -> None: ...

    @staticmethod
    def blocks(doc: StudyResults) -> list[Block]: ...

    @staticmethod
    def scalars(doc: StudyResults) -> dict[str, dict[tuple[str, str], dict[int, float]]]: ...
