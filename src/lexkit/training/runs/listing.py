"""The runs below a directory, and one run at a glance (``lexkit runs``)."""

from __future__ import annotations

import os
from pathlib import Path

from ...core import lock
from ...core.errors import RunError
from ...positions import randomized
from .config import read_config, trained_section
from .files import CONFIG, read_metrics
from .weights import finished, trainer_state


def summary(run_dir: str | Path) -> dict:
    """One run at a glance (``lexkit runs``): scheme, layout (None: uniform) of the model its weights
    hold (past a position drop: the model after it), training length, step / total, finished,
    writing (locked by a live process), the validation bpb of the checkpoint's weights (the last
    one logged at or before its step: rows past it belong to steps a resume will redo), the
    parent run of a fine-tune, world size and device (from the provenance), size in bytes.
    Raises RunError for a directory that is not a readable run."""
    run_dir = Path(run_dir)
    config = read_config(run_dir, training=True)
    state = trainer_state(run_dir) or {}
    step = int(state.get("step", 0))
    try:
        rows = read_metrics(run_dir)
    except RunError:
        rows = []
    bpb = [r["val_bpb"] for r in rows if r.get("val_bpb") is not None and r.get("step", 0) <= step]
    size = sum(p.stat().st_size for p in run_dir.iterdir() if p.is_file())
    origin = config.get("provenance") or {}
    device = origin.get("device") or {}
    model = trained_section(config, run_dir)[0]
    return {
        "path": str(run_dir), "layout": model.get("layout"),
        "scheme": randomized.label(model["scheme"], model.get("random_positions")),
        "train_len": model.get("train_len"),
        "step": step, "steps": int(config["train"]["steps"]),
        "finished": finished(state, int(config["train"]["steps"])),
        "writing": lock.is_locked(run_dir), "val_bpb": bpb[-1] if bpb else None, "bytes": size,
        "parent": (config.get("init") or {}).get("run"), "world_size": origin.get("world_size"),
        "device": device.get("type") if device.get("type") in (None, "cpu") else device.get("name") or device["type"],
    }


def find(root: str | Path, *, depth: int = 4) -> list[Path]:
    """Run directories (holding config.json) at or below ``root``, at most ``depth`` levels down,
    in path order; hidden directories skipped."""
    root = Path(root)
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        level = len(here.relative_to(root).parts)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")) if level < depth else []
        if CONFIG in filenames:
            found.append(here)
    return sorted(found)
