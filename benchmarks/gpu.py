#!/usr/bin/env python
"""GPU throughput of lexkit's FlexAttention path, per scheme, against bias-free SDPA causal.

    python benchmarks/gpu.py [--out docs/benchmarks-gpu.md] [--budget 420]

Without a CUDA device it says so and exits 0. With one, on the ``medium`` preset's model
(12 layers, d_model 512, 8 heads, training length 512, batch 64):

1. training tokens/s (bf16 autocast, AdamW, clipping: the step ``lexkit train`` runs) for each
   scheme with ``kernel="flex"``, against scheme ``none`` with ``kernel="dense"`` (SDPA with
   ``is_causal``: the fused kernel, no bias, no mask);
2. long evaluation: one sequence of n tokens through :func:`lexkit.evaluate.evaluate`, each
   scheme under ``window:W`` and ``bca:W`` (W = 512) with ``kernel="flex"``, against ``none``
   under ``causal`` with ``kernel="dense"``; tokens/s and peak GPU memory. The first call
   (block mask + compilation) is reported apart from the steady state.

Measurements start only while the time budget (default 7 minutes) lasts, so the whole script
ends in under 8; anything left over is listed as skipped.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
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


def sync() -> None:
    torch.cuda.synchronize()


def build(scheme: str, device: torch.device):
    from lexkit.model import GPT
    from lexkit.train import _optimizer, configs

    model_cfg, train_cfg = configs(PRESET, scheme)
    torch.manual_seed(0)
    model = GPT(model_cfg).to(device)
    return model, _optimizer(model, train_cfg), train_cfg


# -- training ----------------------------------------------------------------------------------
def train_step(model, optimizer, x, y, kernel: str, grad_clip: float) -> None:
    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        logits = model(x, kernel=kernel)
    loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    model.scheme.constrain_()


def bench_train(scheme: str, kernel: str, device: torch.device) -> dict:
    model, optimizer, cfg = build(scheme, device)
    model.train()
    gen = torch.Generator(device="cpu").manual_seed(0)
    window = torch.randint(0, 256, (cfg.batch, model.cfg.train_len + 1), generator=gen).to(device)
    x, y = window[:, :-1], window[:, 1:]
    start = time.perf_counter()
    for _ in range(TRAIN_WARMUP):
        train_step(model, optimizer, x, y, kernel, cfg.grad_clip)
    sync()
    warmup_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(TRAIN_STEPS):
        train_step(model, optimizer, x, y, kernel, cfg.grad_clip)
    sync()
    elapsed = time.perf_counter() - start
    return {"scheme": scheme, "kernel": kernel, "warmup_s": warmup_s, "tokens_per_s": TRAIN_STEPS * x.numel() / elapsed}


# -- long evaluation ---------------------------------------------------------------------------
def bench_eval(scheme: str, kernel: str, pattern: str, n: int, device: torch.device) -> dict:
    from lexkit.evaluate import evaluate

    model, _, _ = build(scheme, device)
    model.eval()
    doc = bytes(torch.randint(0, 256, (n,), dtype=torch.uint8).tolist())
    row = {"scheme": scheme, "kernel": kernel, "pattern": pattern, "n": n}
    torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(EVAL_RUNS):
        start = time.perf_counter()
        result = evaluate(model, [doc], [n], pattern, kernel=kernel)
        sync()
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


def table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


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
        "## Machine\n\n" + table(["fact", "value"], [[k, v] for k, v in facts.items()]),
        "## Training (bf16 autocast; tokens/s over "
        f"{TRAIN_STEPS} steps after {TRAIN_WARMUP} warmup steps)\n\n"
        + table(["scheme", "kernel", "tokens/s", "vs none + SDPA causal", "warmup s (compile)"], train_rows),
        "## Long evaluation (one sequence, `lexkit.evaluate.evaluate`, float32)\n\n"
        + table(["scheme", "pattern", "kernel", "n", "tokens/s", "vs none + SDPA causal", "first s", "steady s",
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


def facts(device: torch.device) -> dict:
    import lexkit

    return {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "gpu": torch.cuda.get_device_name(device), "torch": torch.__version__, "cuda": torch.version.cuda,
            "lexkit": lexkit.__version__}


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
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    info = facts(device)
    out.write_text(render(info, train, evals, skipped))
    out.with_suffix(".json").write_text(json.dumps({"machine": info, "train": train, "eval": evals, "skipped": skipped}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
