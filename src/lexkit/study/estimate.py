"""The study's time estimate (``lexkit study --dry-run``): its cells and tables timed by a short
measurement on this machine, nothing trained."""

from __future__ import annotations

import time

import torch

from .. import runs
from ..device import eval_mode, resolve_device
from ..model import GPT
from ..train import device_autocast, make_optimizer, train_step
from .cache import Cache
from .plan import Plan, Section, entries


def estimate(plan: Plan, cache: Cache, tables: list[Section]) -> dict:
    """The cells, and a time estimate from a short measurement on this machine: the trainer's own
    :func:`~lexkit.train.train_step`, 4 steps per row of the grid (the first is warm-up; the median
    of the other three counts), and evaluation from one forward pass at the longest length (``grid``:
    label -> ``train_s``, ``eval_s``); then each table's tasks (``tables``: key -> its
    :meth:`~lexkit.study.plan.Section.tasks`, scaled from those)."""
    device = resolve_device(plan.cfg.device)
    if plan.cfg.threads:  # timed at the thread count the study will run at
        torch.set_num_threads(plan.cfg.threads)
    cells = plan.cells()
    lengths, patterns = plan.lengths(), plan.patterns()
    grid = {}
    for label in entries(plan.cfg):
        cell = next(c for c in cells if c.label == label)
        model, step_s, probe = timed_steps(cell, device, max(lengths))
        with eval_mode(model), torch.no_grad():
            t0 = time.perf_counter()
            try:
                model(probe)
            except ValueError:
                pass
            forward = time.perf_counter() - t0
        eval_s = forward * plan.cfg.eval_docs * len(lengths) * len(patterns) * 1.3
        grid[label] = {"train_s": step_s * cell.train_cfg.steps, "eval_s": eval_s}
    total = sum(v["train_s"] + v["eval_s"] for v in grid.values()) * plan.cfg.seeds
    work = {table.key: table.tasks(grid, device) for table in tables}
    total += sum(task["seconds"] for tasks in work.values() for task in tasks)
    done = {c.name for c in cells if (cache.run_dir(c) / runs.CHECKPOINT).is_file()}
    # what the trained runs already here save (their evaluations and scores may be cached too: not counted)
    saved = sum(grid[c.label]["train_s"] for c in cells if c.name in done)
    saved += sum(task["seconds"] for tasks in work.values() for task in tasks if task.get("exists"))
    return {"cells": [{"label": c.label, "seed": c.seed, "run": c.name, "exists": c.name in done} for c in cells],
            "lengths": lengths, "patterns": patterns, "grid": grid, "tables": work, "total_s": total,
            "left_s": total - saved}


def timed_steps(cell, device, n: int) -> tuple[torch.nn.Module, float, torch.Tensor]:
    """A fresh model of ``cell`` (seed 0), the seconds of one training step with the trainer's own
    :func:`~lexkit.train.train_step` (4 steps: the first is warm-up, the median of the other three
    counts) and a random probe of ``n`` tokens for timing its forward pass."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GPT(cell.model_cfg).to(device)
        x = torch.randint(0, 256, (cell.train_cfg.batch, cell.model_cfg.train_len), device=device)
        probe = torch.randint(0, 256, (1, n), device=device)
    optimizer = make_optimizer(model, cell.train_cfg)
    times = []
    for _ in range(4):
        t0 = time.perf_counter()
        train_step(model, optimizer, x, x, grad_clip=cell.train_cfg.grad_clip, autocast=device_autocast(device))
        times.append(time.perf_counter() - t0)
    return model, sorted(times[1:])[1], probe
