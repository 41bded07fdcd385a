#!/usr/bin/env python
"""GPU throughput of lexkit's FlexAttention path, per scheme, against bias-free SDPA causal: training
and long evaluation on the ``medium`` preset's model, within a time budget. Without a CUDA device it
says so and exits 0. What it measures: benchmarks/README.md.

    python benchmarks/gpu.py [--out docs/benchmarks-gpu.md] [--budget 420]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time

import torch

from common import ROOT, gpu_facts, md_table, random_document, write_report
from contenders import lexkit_model
from lexkit.model import GPT
from lexkit.train import device_autocast, make_optimizer, train_step

PRESET = "medium"
SCHEMES = ("alibi", "rope", "xpos", "kerple-log", "t5", "sandwich")  # the first three come first
BASELINE = ("none", "dense")  # scheme, kernel: SDPA causal without bias
EVAL_LENGTHS = (16384, 65536)
TRAIN_WARMUP, TRAIN_STEPS, EVAL_RUNS = 3, 10, 3


class Budget:
    """Wall-clock budget: ``allows(cost)`` is False once ``cost`` seconds would overrun it."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.perf_counter() + seconds

    def allows(self, cost: float) -> bool:
        return time.perf_counter() + cost < self.deadline


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build(scheme: str, device: torch.device):
    torch.manual_seed(0)
    model, train_cfg = lexkit_model(scheme, PRESET)
    return model.to(device), train_cfg


def with_kernel(model: GPT, kernel: str) -> GPT:
    """``model(x)`` attends with ``kernel`` (train_step calls ``model(x)``; the model stays a GPT,
    so the step still applies its scheme's constraints)."""
    model.forward = functools.partial(type(model).forward, model, kernel=kernel)
    return model


# -- training ----------------------------------------------------------------------------------
def bench_train(scheme: str, kernel: str, device: torch.device) -> dict:
    """The step ``lexkit train`` runs (:func:`lexkit.train.train_step`, bf16 autocast on CUDA,
    the optimizer of :func:`lexkit.train.make_optimizer`) with the given attention kernel."""
    model, cfg = build(scheme, device)
    model = with_kernel(model.train(), kernel)
    optimizer, autocast = make_optimizer(model, cfg), device_autocast(device)
    gen = torch.Generator(device="cpu").manual_seed(0)
    window = torch.randint(0, 256, (cfg.batch, model.cfg.train_len + 1), generator=gen).to(device)
    x, y = window[:, :-1], window[:, 1:]

    def steps(count: int) -> float:
        start = time.perf_counter()
        for _ in range(count):
            train_step(model, optimizer, x, y, grad_clip=cfg.grad_clip, autocast=autocast)
        sync(device)
        return time.perf_counter() - start

    warmup_s = steps(TRAIN_WARMUP)
    elapsed = steps(TRAIN_STEPS)
    return {"scheme": scheme, "kernel": kernel, "warmup_s": warmup_s, "tokens_per_s": TRAIN_STEPS * x.numel() / elapsed}


# -- long evaluation ---------------------------------------------------------------------------
def bench_eval(scheme: str, kernel: str, pattern: str, n: int, device: torch.device) -> dict:
    from lexkit.evaluate import evaluate

    model, _ = build(scheme, device)
    model.eval()
    doc = random_document(n)
    row = {"scheme": scheme, "kernel": kernel, "pattern": pattern, "n": n}
    torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(EVAL_RUNS):
        start = time.perf_counter()
        result = evaluate(model, [doc], [n], pattern, kernel=kernel)
        sync(device)
        times.append(time.perf_counter() - start)
        unavailable = result["results"][0].get("unavailable")
        if unavailable:
            return {**row, "error": unavailable}
    steady = statistics.median(times[1:])
    return {**row, "first_s": times[0], "steady_s": steady, "tokens_per_s": n / steady,
            "peak_gb": torch.cuda.max_memory_allocated(device) / 1024**3}


def attempt(fn, *args) -> dict:
    """Run one measurement; a failure (out of memory, a refused combination) becomes a row."""
    try:
        return fn(*args)
    except (RuntimeError, ValueError) as exc:
        torch.cuda.empty_cache()
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"}


# -- plan, run, report -------------------------------------------------------------------------
def plan(window: int) -> list[tuple]:
    """(kind, cost estimate in s, args) in priority order: the baseline and the paper's three
    schemes first, the long length before the shorter one, the other bias schemes last."""
    core, extra = SCHEMES[:3], SCHEMES[3:]
    local, block = f"window:{window}", f"bca:{window}"
    long, short = max(EVAL_LENGTHS), min(EVAL_LENGTHS)
    jobs = [("train", 40, BASELINE)] + [("train", 60, (s, "flex")) for s in core]
    for n in (long, short):
        jobs += [("eval", 30, (*BASELINE, "causal", n))] + [("eval", 45, (s, "flex", local, n)) for s in core]
    jobs += [("eval", 45, (s, "flex", block, long)) for s in ("alibi", "xpos")]
    jobs += [("train", 60, (s, "flex")) for s in extra]
    jobs += [("eval", 45, (s, "flex", local, long)) for s in extra]
    return jobs


def run_all(budget: Budget, device: torch.device, window: int) -> tuple[list, list, list]:
    train, evals, skipped = [], [], []
    for kind, cost, args in plan(window):
        labels = dict(zip(("scheme", "kernel", "pattern", "n"), args))
        if not budget.allows(cost):
            skipped.append(" ".join(f"{k}={v}" for k, v in {"job": kind, **labels}.items()))
            continue
        row = {**labels, **attempt(bench_train if kind == "train" else bench_eval, *args, device)}
        (train if kind == "train" else evals).append(row)
        print(kind, json.dumps(row), flush=True)
    return train, evals, skipped


def render(facts: dict, train: list, evals: list, skipped: list) -> str:
    base = next((r.get("tokens_per_s") for r in train if r["scheme"] == BASELINE[0]), None)
    train_rows = [[r["scheme"], r["kernel"], f"{r['tokens_per_s']:,.0f}" if "error" not in r else r["error"],
                   f"{r['tokens_per_s'] / base:.2f}x" if base and "error" not in r else "—",
                   f"{r['warmup_s']:.1f}" if "error" not in r else "—"] for r in train]
    base_eval = {r["n"]: r.get("tokens_per_s") for r in evals if r["scheme"] == BASELINE[0]}
    eval_rows = []
    for r in evals:
        head = [r["scheme"], r["pattern"], r["kernel"], f"{r['n']:,}"]
        if "error" in r:
            eval_rows.append(head + [r["error"], "—", "—", "—", "—"])
            continue
        ref = base_eval.get(r["n"])
        eval_rows.append(head + [f"{r['tokens_per_s']:,.0f}", f"{r['tokens_per_s'] / ref:.2f}x" if ref else "—",
                                 f"{r['first_s']:.1f}", f"{r['steady_s']:.3f}", f"{r['peak_gb']:.2f}"])
    parts = [
        "# GPU benchmarks: FlexAttention per scheme against SDPA causal",
        f"Written by `python benchmarks/gpu.py`. Model: {preset_text()}.",
        "## Machine\n\n" + md_table(["fact", "value"], [[k, v] for k, v in facts.items()]),
        "## Training (bf16 autocast; tokens/s over "
        f"{TRAIN_STEPS} steps after {TRAIN_WARMUP} warmup steps)\n\n"
        + md_table(["scheme", "kernel", "tokens/s", "vs none + SDPA causal", "warmup s (compile)"], train_rows),
        "## Long evaluation (one sequence, `lexkit.evaluate.evaluate`, float32)\n\n"
        + md_table(["scheme", "pattern", "kernel", "n", "tokens/s", "vs none + SDPA causal", "first s", "steady s",
                    "peak GB"], eval_rows),
    ]
    if skipped:
        parts.append("## Skipped (time budget)\n\n" + "\n".join(f"- {s}" for s in skipped))
    return "\n\n".join(parts) + "\n"


def preset_text() -> str:
    from lexkit.presets import get

    p = get(PRESET)
    return (f"the `{PRESET}` preset ({p['n_layers']} layers, d_model {p['d_model']}, {p['n_heads']} heads, "
            f"training length {p['train_len']}, batch {p['batch']})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks-gpu.md"))
    parser.add_argument("--budget", type=float, default=420.0, help="seconds within which measurements start")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmarks/gpu.py: no CUDA device here; nothing to measure (the CPU benchmark is benchmarks/run.py)")
        return 0
    from lexkit.presets import get

    device = torch.device("cuda")
    budget = Budget(args.budget)
    train, evals, skipped = run_all(budget, device, window=get(PRESET)["train_len"])
    info = gpu_facts(device)
    write_report(args.out, render(info, train, evals, skipped),
                 {"machine": info, "train": train, "eval": evals, "skipped": skipped})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
