"""The one rule of a context-extension fine-tune, for table E and table G alike: its configs and
cache key (and the same configs before its parent exists, for the estimate), and its run directory
beside its parent's."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .... import positions
from ....training import runs
from ....training.runs import configs_from_run
from ...cache import Cache
from ...plan import Cell, digest, slug
from .configurations import Finetune


@dataclasses.dataclass(frozen=True)
class FinetuneRun:
    """A fine-tune trained (or found trained): its run directory, configs and cache key."""

    run_dir: Path
    model_cfg: Any
    train_cfg: Any
    key: str


def _settings(ft: Finetune, steps: int) -> dict:
    """What a fine-tune of ``steps`` steps sets beyond its parent's settings."""
    return {"train_len": ft.train_len, "steps": steps, "warmup": max(1, steps // 10), "eval_every": steps,
            "save_every": max(1, -(-steps // 4)), "stop": ""}


def configs(parent_dir: Path, parent: Cell, ft: Finetune, steps: int) -> tuple[Any, Any, str]:
    """The configs of ``ft`` of the run of ``parent`` (in ``parent_dir``) for ``steps`` steps, and its
    cache key. It checkpoints like any run (4 times), so an interrupted study resumes it where it
    stopped; the key leaves the checkpoint interval out (it does not change the run), so a study
    cached before keeps its fine-tunes. It runs every step (no stop rule of its parent's)."""
    model_cfg, train_cfg = configs_from_run(parent_dir, scheme=ft.scheme, **_settings(ft, steps))
    key = digest({"parent": parent.key, "model": model_cfg.identity(),
                  "train": dataclasses.replace(train_cfg, save_every=steps).recorded()})
    return model_cfg, train_cfg, key


def finetuned(model_cfg: Any, train_cfg: Any, ft: Finetune, steps: int) -> tuple[Any, Any]:
    """What :func:`configs` makes of a parent of ``model_cfg`` and ``train_cfg`` (a uniform run), from
    its configs alone: for the estimate, before the parent is trained."""
    values = _settings(ft, steps)
    model = dataclasses.replace(model_cfg, scheme=positions.pin(ft.scheme, model_cfg.position_len),
                                train_len=values.pop("train_len"))
    return model, dataclasses.replace(train_cfg, **values)


def finetune(cache: Cache, parent: Cell, ft: Finetune, steps: int) -> FinetuneRun:
    """``ft`` of the run of ``parent`` for ``steps`` steps (:func:`configs`), trained through
    ``cache`` from the parent's weights in ``runs/<parent>-ft-<scheme>-<key>``."""
    base = cache.run_dir(parent)
    model_cfg, train_cfg, key = configs(base, parent, ft, steps)
    run_dir = cache.out / "runs" / f"{parent.name}-ft-{slug(ft.scheme)}-{key}"
    cache.trained(run_dir, model_cfg, train_cfg, init=base)
    return FinetuneRun(run_dir, model_cfg, train_cfg, key)


def trained_key(cache: Cache, parent: Cell, ft: Finetune, steps: int) -> str | None:
    """The cache key of ``ft`` of the run of ``parent`` for ``steps`` steps once that run is trained
    (the key reads its run directory: :func:`configs`); None before."""
    base = cache.run_dir(parent)
    if not runs.finished(runs.trainer_state(base), parent.train_cfg.steps):
        return None
    return configs(base, parent, ft, steps)[2]
