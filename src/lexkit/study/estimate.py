"""The study's time estimate (``lexkit study --dry-run``): its cells and tables timed by a short
measurement on this machine, nothing trained."""

from __future__ import annotations

import time

import torch

from .. import runs
from ..device import eval_mode, resolve_device
from ..train import device_autocast, make_optimizer, train_step
from . import retrieval as study_retrieval


class Estimate:
    """The dry run (mixed into :class:`lexkit.study.Study`)."""

    def estimate(self) -> dict:
        """The cells, and a time estimate from a short measurement on this machine: the
        trainer's own :func:`~lexkit.train.train_step`, 4 steps per scheme (the first is warm-up;
        the median of the other three counts), and evaluation from one forward pass at the
        longest length."""
        device = resolve_device(self.cfg.device)
        if self.cfg.threads:  # timed at the thread count the study will run at
            torch.set_num_threads(self.cfg.threads)
        cells = self.cells()
        lengths, patterns = self.lengths(), self.patterns()
        per_scheme = {}
        for scheme in self.cfg.schemes:
            cell = next(c for c in cells if c.scheme == scheme)
            model, step_s, probe = timed_steps(cell, device, max(lengths))
            train_s = step_s * cell.train_cfg.steps
            with eval_mode(model), torch.no_grad():
                t0 = time.perf_counter()
                try:
                    model(probe)
                except ValueError:
                    pass
                forward = time.perf_counter() - t0
            eval_s = forward * self.cfg.eval_docs * len(lengths) * len(patterns) * 1.3
            per_scheme[scheme] = {"train_s": train_s, "eval_s": eval_s}
        total = sum(v["train_s"] + v["eval_s"] for v in per_scheme.values()) * self.cfg.seeds
        extension = self.extension_plan(per_scheme.get("rope"))
        total += sum(task["seconds"] for task in extension)
        per_step, per_token = self.retrieval_costs(device)
        retrieval = study_retrieval.plan(self, per_step, per_token) if per_step is not None else []
        total += sum(task["seconds"] for task in retrieval)
        done = {c.name for c in cells if (self.out / "runs" / c.name / runs.CHECKPOINT).is_file()}
        return {"cells": [{"scheme": c.scheme, "seed": c.seed, "run": c.name, "exists": c.name in done} for c in cells],
                "lengths": lengths, "patterns": patterns, "per_scheme": per_scheme, "extension": extension,
                "retrieval": retrieval, "total_s": total}

    def retrieval_costs(self, device) -> tuple[float | None, float | None]:
        """Seconds of one training step of table G's runs (the median of three after a warm-up
        step, at the recipe's batch) and of one token of their forward pass at 16x; (None, None)
        when table G is off."""
        found = study_retrieval.cells(self) if self.cfg.retrieval else []
        if not found:
            return None, None
        n = max(study_retrieval.MULTIPLES) * found[0].model_cfg.train_len
        model, step_s, probe = timed_steps(found[0], device, n)
        with eval_mode(model), torch.no_grad():
            t0 = time.perf_counter()
            model(probe)
            per_token = (time.perf_counter() - t0) / n
        return step_s, per_token


def timed_steps(cell, device, n: int) -> tuple[torch.nn.Module, float, torch.Tensor]:
    """A fresh model of ``cell`` (seed 0), the seconds of one training step with the trainer's own
    :func:`~lexkit.train.train_step` (4 steps: the first is warm-up, the median of the other three
    counts) and a random probe of ``n`` tokens for timing its forward pass."""
    from ..model import GPT

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
