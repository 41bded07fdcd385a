"""The one rule of a context-extension fine-tune, for table E and table G alike: its configs and
cache key, its run directory beside its parent's, and what it costs."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ....runs import configs_from_run
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


def configs(parent_dir: Path, parent: Cell, ft: Finetune, steps: int) -> tuple[Any, Any, str]:
    """The configs of ``ft`` of the run of ``parent`` (in ``parent_dir``) for ``steps`` steps, and its
    cache key. It checkpoints like any run (4 times), so an interrupted study resumes it where it
    stopped; the key leaves the checkpoint interval out (it does not change the run), so a study
    cached before keeps its fine-tunes."""
    model_cfg, train_cfg = configs_from_run(
        parent_dir, scheme=ft.scheme, train_len=ft.train_len, steps=steps, warmup=max(1, steps // 10),
        eval_every=steps, save_every=max(1, -(-steps // 4)))
    key = digest({"parent": parent.key, "model": model_cfg.identity(),
                  "train": dataclasses.asdict(dataclasses.replace(train_cfg, save_every=steps))})
    return model_cfg, train_cfg, key


def finetune(cache: Cache, parent: Cell, ft: Finetune, steps: int) -> FinetuneRun:
    """``ft`` of the run of ``parent`` for ``steps`` steps (:func:`configs`), trained through
    ``cache`` from the parent's weights in ``runs/<parent>-ft-<scheme>-<key>``."""
    base = cache.run_dir(parent)
    model_cfg, train_cfg, key = configs(base, parent, ft, steps)
    run_dir = cache.out / "runs" / f"{parent.name}-ft-{slug(ft.scheme)}-{key}"
    cache.trained(run_dir, model_cfg, train_cfg, init=base)
    return FinetuneRun(run_dir, model_cfg, train_cfg, key)


def seconds(ft: Finetune, steps: int, per_step: float, train_len: int) -> float:
    """What training ``ft`` for ``steps`` steps costs, from ``per_step`` (one training step of its
    parent at ``train_len``): a step at ``ft.train_len`` costs ``ft.train_len / train_len`` of them,
    by tokens."""
    return per_step * ft.train_len / train_len * steps
