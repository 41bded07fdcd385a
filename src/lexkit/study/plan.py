"""The study's plan: its configuration, its cells (one training run per scheme and seed), the
lengths and patterns it evaluates, and the cache keys of every cell's work (a hash of its full
config, so a change of any setting computes anew and nothing else); and :class:`Section`, the one
interface of the tables it runs beside its grid."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Protocol

from .. import checks, positions, presets, tasks
from ..attention import create as create_pattern
from ..data import Corpus, load_corpus
from ..evaluate import default_lengths
from ..extension import Finetune
from ..layouts import check_pattern
from ..mix import parse_mix
from ..rows import SCHEMA, Row
from ..runs import configs_from_run
from ..settings import configs
from .recipe import RECIPE

DEFAULT_SCHEMES = [
    "none", "sinusoidal", "rope", "xpos", "xpos:rotate=false", "alibi", "kerple-log", "kerple-power", "sandwich",
]
#: layouts beside the schemes, in the grid (tables A-D) and as rows of table G (docs/layouts.md): HWFA (RoPE window
#: layers under one full NoPE layer with log-n) with token shift, windows 16 and 32: the configurations nearest the
#: goal in the layout measurements (retrieval at 16x at every depth; bpb 16x/1x 1.04 at W=16)
DEFAULT_LAYOUTS: list[str] = ["hwfa:W=16,shift=0.5", "hwfa:W=32,shift=0.5"]
DEFAULT_PATTERNS = ["causal", "window", "bca"]
#: the version of results.json a study writes (:data:`lexkit.rows.SCHEMA`)
SCHEMA_VERSION = SCHEMA
#: bump when the meaning of a cached evaluation changes (invalidates eval/resolution caches)
EVAL_VERSION = 1


@dataclasses.dataclass
class StudyConfig:
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
    extension: bool = True  # the context-extension comparison on the rope run (lexkit.extension)
    extension_steps: int = 60  # steps of each fine-tune at 4x the training length
    retrieval: bool = True  # table G, use of context (lexkit.study.retrieval)
    retrieval_steps: int = RECIPE.steps  # training steps of each run with the retrieval mix
    retrieval_preset: str = RECIPE.preset  # the size of those runs (the measured recipe's)
    retrieval_samples: int = 20  # needle documents per (length, depth, format) in table G
    retrieval_seeds: int = 3  # seeds of each of table G's rows

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
        presets.get(self.retrieval_preset)  # an unknown preset fails now
        for key in ("eval_docs", "resolution_texts", "extension_steps", "retrieval_steps", "retrieval_samples",
                    "retrieval_seeds"):
            checks.number(key, getattr(self, key))


def entries(cfg: StudyConfig) -> list[str]:
    """The rows of the study's grid, in order: its schemes, then its layouts."""
    return [*cfg.schemes, *cfg.layouts]


def unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def slug(spec: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in spec)


@dataclasses.dataclass
class Cell:
    """One training run of the study: a scheme and a seed."""

    scheme: str
    seed: int
    model_cfg: Any
    train_cfg: Any
    key: str
    prefix: str = ""  # "mix-": a run of table G, trained with the retrieval mix

    @property
    def name(self) -> str:
        return f"{self.prefix}{slug(self.scheme)}-s{self.seed}-{self.key}"


class Plan:
    """What a study runs, derived from its :class:`StudyConfig` alone: its cells, lengths and
    patterns, and the keys its work is cached under. The corpus is loaded on first use."""

    def __init__(self, cfg: StudyConfig) -> None:
        self.cfg = cfg
        self._corpus: Corpus | None = None

    @property
    def corpus(self) -> Corpus:
        if self._corpus is None:
            self._corpus = load_corpus(self.cfg.data)
        return self._corpus

    def cell(self, preset: str, scheme: str, seed: int, prefix: str = "", **settings) -> Cell:
        """One training run of ``scheme`` (a scheme spec, or one of the study's layouts) at ``preset``
        with ``settings``, keyed by its full config, the corpus and, for a run with a retrieval mix,
        what defines its tasks' documents (:func:`lexkit.tasks.identity`: a new derivation trains it
        anew). A layout's cell is labelled with the layout as given."""
        if scheme in self.cfg.layouts:
            settings = {"layout": scheme, **settings}
        model_cfg, train_cfg = configs(preset, "rope" if scheme in self.cfg.layouts else scheme, seed=seed,
                                       data=self.cfg.data, **settings)
        key = {"model": model_cfg.identity(), "train": dataclasses.asdict(train_cfg), "data": self.corpus.fingerprint}
        if train_cfg.mix:
            key["tasks"] = [tasks.identity(task) for task in parse_mix(train_cfg.mix)]
        return Cell(model_cfg.label, seed, model_cfg, train_cfg, digest(key), prefix)

    def cells(self) -> list[Cell]:
        """The main grid's training runs: every scheme, every seed."""
        return [self.cell(self.cfg.preset, spec, seed, steps=self.cfg.steps)
                for spec in entries(self.cfg) for seed in range(self.cfg.seeds)]

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

    def finetune(self, base: Path, cell: Cell, ft: Finetune) -> tuple[Any, Any, str]:
        """The configs of one context-extension fine-tune of ``cell``'s run (in ``base``) and its
        cache key. It checkpoints like any run (4 times), so an interrupted study resumes it where
        it stopped; the key leaves the checkpoint interval out (it does not change the run), so a
        study cached before keeps its fine-tunes."""
        steps = self.cfg.extension_steps
        model_cfg, train_cfg = configs_from_run(
            base, scheme=ft.scheme, train_len=ft.train_len, steps=steps, warmup=max(1, steps // 10),
            eval_every=steps, save_every=max(1, -(-steps // 4)))
        key = digest({"parent": cell.key, "model": model_cfg.identity(),
                      "train": dataclasses.asdict(dataclasses.replace(train_cfg, save_every=steps))})
        return model_cfg, train_cfg, key

    def shape(self) -> dict:
        """The study's model shape, as the resolution instrument takes it (initial values under
        seed 0, the random state of the process untouched)."""
        cfg = self.cells()[0].model_cfg
        return {"heads": cfg.n_heads, "head_dim": cfg.head_dim, "seed": 0, "max_len": cfg.position_len}


class Section(Protocol):
    """A table the study runs beside its grid (E, context extension; G, use of context), one
    interface for both: ``key``, the section of results.json it fills; :meth:`run`, that section
    (None when the table is off); :meth:`tasks`, its work for ``--dry-run``, each task with its
    estimated ``seconds`` (``grid``: the grid's measured ``train_s``/``eval_s`` per scheme)."""

    key: str

    def run(self) -> Row | None: ...

    def tasks(self, grid: dict[str, dict], device) -> list[dict]: ...
