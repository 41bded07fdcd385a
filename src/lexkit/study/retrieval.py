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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .. import positions, runs
from ..extension import finetunes, methods
from ..retrieval import DEFAULT_MULTIPLES

if TYPE_CHECKING:
    from ..data import Corpus
    from .plan import Cell, StudyConfig


class StudyParts(Protocol):
    """What table G uses of a :class:`lexkit.study.Study`, written out here rather than imported
    (the study's execution imports this module; an import back would close a circle)."""

    cfg: StudyConfig
    out: Path
    device: str
    progress: bool

    @property
    def corpus(self) -> Corpus: ...
    def patterns(self, train_len: int | None = None) -> list[str]: ...
    def cached(self, task: str, name: str, path: Path, compute: Callable[[], dict]) -> dict: ...
    def trained(self, run_dir: Path, model_cfg, train_cfg, *, init: Path | None = None) -> None: ...
    def finetune(self, cell: Cell, ft) -> tuple[Any, Any, str]: ...

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


@dataclasses.dataclass(frozen=True)
class Config:
    """One configuration of table G: a run (by its cell, or a fine-tune of it), the scheme and
    log-n its weights run under, and the patterns it is scored under."""

    label: str
    kind: str  # "scheme", "method" or "fine-tune"
    scheme: str | None  # None: as trained
    logn: bool | None
    patterns: tuple[str, ...]


def schemes(study: StudyParts) -> list[str]:
    """The study's schemes that table G trains with the mix, in the study's order."""
    wanted = {positions.canonical(s) for s in SCHEMES}
    return [s for s in study.cfg.schemes if s in wanted]


def cells(study: StudyParts) -> list[Cell]:
    """One run per scheme of :func:`schemes`, seed 0, trained with :data:`RECIPE` for the
    study's ``retrieval_steps`` at its ``retrieval_preset``."""
    from ..train import configs
    from .plan import Cell, digest

    cfg, out = study.cfg, []
    steps = cfg.retrieval_steps
    for scheme in schemes(study):
        model_cfg, train_cfg = configs(cfg.retrieval_preset, scheme, seed=0, steps=steps, batch=RECIPE["batch"],
                                       lr=RECIPE["lr"], mix=RECIPE["mix"], data=cfg.data)
        key = digest({"model": dataclasses.asdict(model_cfg), "train": dataclasses.asdict(train_cfg),
                      "data": study.corpus.fingerprint})
        out.append(Cell(model_cfg.scheme, 0, model_cfg, train_cfg, key, prefix="mix-"))
    return out


def train_len(study: StudyParts) -> int:
    from ..train import configs

    return configs(study.cfg.retrieval_preset, "none")[0].train_len


def configurations(study: StudyParts, cell: Cell) -> list[Config]:
    """The scheme itself under every study pattern, then on ``rope`` (when the study runs table
    E) each no-fine-tune method of table E but plain rope, then each fine-tune."""
    t = train_len(study)
    out = [Config(cell.scheme, "scheme", None, None, tuple(study.patterns(t)))]
    if cell.scheme != "rope" or not study.cfg.extension:
        return out
    for m in methods(t, max(MULTIPLES) * t):
        if (m.scheme, m.pattern, m.logn) != ("rope", "causal", False):
            out.append(Config(m.label, "method", m.scheme, m.logn, (m.pattern,)))
    out += [Config(ft.label, "fine-tune", None, None, ft.patterns) for ft in finetunes(t)]
    return out


def cache_path(study: StudyParts, key: str, config: Config) -> Path:
    from .plan import digest

    what = {"run": key, "scheme": config.scheme, "logn": config.logn, "patterns": config.patterns,
            "task": TASK, "size": SIZE, "multiples": MULTIPLES, "bpb": BPB_MULTIPLES, "depths": DEPTHS,
            "samples": study.cfg.retrieval_samples, "docs": study.cfg.eval_docs, "v": VERSION}
    return study.out / "cache" / f"retrieval-{digest(what)}.json"


def run(study: StudyParts) -> dict | None:
    """Train (or find) every run of table G, score every configuration (or read it from the
    cache) and return what results.json stores under ``retrieval``; None when the table is off
    or no studied scheme is among :data:`SCHEMES`."""
    if not study.cfg.retrieval or not schemes(study):
        return None
    from .plan import slug

    t = train_len(study)
    entries = []
    for cell in cells(study):
        base = study.out / "runs" / cell.name
        study.trained(base, cell.model_cfg, cell.train_cfg)
        for config in configurations(study, cell):
            run_dir, key = base, cell.key
            if config.kind == "fine-tune":
                ft = next(f for f in finetunes(t) if f.label == config.label)
                model_cfg, train_cfg, key = study.finetune(cell, ft)
                run_dir = study.out / "runs" / f"{cell.name}-ft-{slug(ft.scheme)}-{key}"
                study.trained(run_dir, model_cfg, train_cfg, init=base)
            doc = study.cached("retrieval", f"{cell.name} {config.label}", cache_path(study, key, config),
                               lambda c=config, d=run_dir: score(study, d, c, t))
            entries += [{"label": config.label, "kind": config.kind, "scheme": doc["scheme"], "logn": doc["logn"],
                         "pattern": pattern, "run": str(run_dir.relative_to(study.out)),
                         "rows": [r for r in doc["rows"] if r["pattern"] == pattern],
                         "cells": [c for c in doc["cells"] if c["pattern"] == pattern]}
                        for pattern in doc["patterns"]]
    first = cells(study)[0]
    return {"task": TASK, "size": SIZE, "train_len": t, "preset": study.cfg.retrieval_preset,
            "steps": study.cfg.retrieval_steps, "batch": first.train_cfg.batch, "lr": first.train_cfg.lr,
            "mix": first.train_cfg.mix, "seeds": 1, "multiples": list(MULTIPLES), "bpb_multiples": list(BPB_MULTIPLES),
            "depths": list(DEPTHS), "samples": study.cfg.retrieval_samples,
            "finetune_steps": study.cfg.extension_steps, "configs": entries}


def score(study: StudyParts, run_dir: Path, config: Config, t: int) -> dict:
    """One configuration's retrieval cells and bpb (exact match from the teacher-forced pass,
    :func:`lexkit.retrieval.score` with ``decode=False``)."""
    from ..retrieval import context_rows
    from ..subject import load

    subject = load(run_dir, device=study.device, scheme=config.scheme, logn=config.logn)
    patterns = [subject.model.pattern(p).spec for p in config.patterns]
    rows, found = context_rows(subject, config.label, task=TASK, multiples=MULTIPLES, patterns=patterns,
                               depths=DEPTHS, samples=study.cfg.retrieval_samples, size=SIZE,
                               documents=study.corpus.valid, bpb_multiples=BPB_MULTIPLES, train_len=t,
                               max_docs=study.cfg.eval_docs, decode=False, progress=study.progress)
    return {"scheme": subject.describe()["scheme"], "logn": bool(subject.config["model"].get("logn", False)),
            "patterns": patterns, "rows": [r.to_json() for r in rows], "cells": [c.to_json() for c in found]}


def plan(study: StudyParts, per_step: float, per_token: float) -> list[dict]:
    """The tasks of table G for ``--dry-run``: each run's training and each configuration's
    scoring, with seconds scaled from a measurement on this machine (``per_step``: one training
    step of table G's model at the recipe's batch; ``per_token``: one token of its forward pass
    at 16x): the needle documents and the bpb documents of every pattern, and a fine-tune's
    steps at about :data:`FINETUNE_COST` times a training step."""
    if not study.cfg.retrieval or not schemes(study):
        return []
    t = train_len(study)
    needles = len(DEPTHS) * study.cfg.retrieval_samples
    tokens = sum(m * t for m in MULTIPLES) * needles + sum(m * t for m in BPB_MULTIPLES) * study.cfg.eval_docs
    out = []
    for cell in cells(study):
        exists = (study.out / "runs" / cell.name / runs.CHECKPOINT).is_file()
        out.append({"kind": "train", "label": f"{cell.scheme} + mix", "run": cell.name, "exists": exists,
                    "seconds": per_step * cell.train_cfg.steps})
        for config in configurations(study, cell):
            seconds = per_token * tokens * len(config.patterns)
            if config.kind == "fine-tune":
                seconds += per_step * FINETUNE_COST * study.cfg.extension_steps
            out.append({"kind": config.kind, "label": config.label, "patterns": len(config.patterns),
                        "seconds": seconds})
    return out


#: a fine-tune step at 4x the training length costs about 4x a training step (by tokens)
FINETUNE_COST = 4
