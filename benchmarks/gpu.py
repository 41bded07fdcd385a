#!/usr/bin/env python
"""The GPU lane's measurements in one script: training tokens/s and MFU per scheme at the ``medium``
preset (bf16 autocast, lexkit's own train step) through the ``auto`` kernel (flex for the biases, SDPA
``is_causal`` for rope/xpos) against ``none`` on SDPA causal, x-transformers at the same size side by
side when it is installed, and long evaluation (one sequence: speed, peak memory; 1,048,576 tokens
streamed under window:512). It starts no measurement past its time budget (8 minutes in all by
default), prints progress, and writes docs/benchmarks-gpu.md (+ .json). Without CUDA it says so and
exits 0; ``--dry-run`` runs the whole lane on the CPU at the ``tiny`` preset and short lengths (the
code path, not a measurement). ``--compile`` adds the compiled step (lexkit.training.compiled: forward, loss and
backward through torch.compile, bf16 autocast inside it) beside the eager one for the baseline and the
first three schemes, its warm-up (the compile) timed apart.

    python benchmarks/gpu.py [--out docs/benchmarks-gpu.md] [--budget 420] [--dry-run] [--compile]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
import sys
import time

import torch

from builders import XT_SCHEMES, count_params, lexkit_model, xt_model
from common import ROOT, cpu_facts, gpu_facts, installed, random_document, table, write_report
from lexkit.attention import kernel_label, record_kernels
from lexkit.core import provenance
from lexkit.core.device import training_dtype
from lexkit.documents.blocks import Bullets, Heading, Text
from lexkit.documents.render import markdown
from lexkit.model.gpt import GPT
from lexkit.training.compiled import CompiledLoss
from lexkit.training.loop import device_autocast, make_optimizer, train_step, train_step_stats

SCHEMES = ("alibi", "rope", "xpos", "kerple-log", "t5", "sandwich", "kerple-power")  # the first three first
BASELINE = ("none", "dense")  # scheme, kernel: SDPA causal without bias


@dataclasses.dataclass(frozen=True)
class Lane:
    """What one run of the script measures."""

    preset: str
    eval_lengths: tuple[int, ...]  # one-pass evaluation lengths
    stream_length: int  # the streamed evaluation (window = the training length)
    warmup: int  # training steps before timing (compiles)
    steps: int  # timed training steps
    eval_runs: int  # evaluations per measurement (the first compiles; the median of the rest counts)


GPU = Lane("medium", eval_lengths=(16384, 65536), stream_length=1_048_576, warmup=3, steps=10, eval_runs=3)
DRY = Lane("tiny", eval_lengths=(256, 640), stream_length=4608, warmup=1, steps=1, eval_runs=2)


class Budget:
    """Wall-clock budget: ``allows(cost)`` is False once ``cost`` seconds would overrun it."""

    def __init__(self, seconds: float) -> None:
        self.start = time.perf_counter()
        self.deadline = self.start + seconds

    def allows(self, cost: float) -> bool:
        return time.perf_counter() + cost < self.deadline

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_gb(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 1024**3 if device.type == "cuda" else None


def build(scheme: str, lane: Lane, device: torch.device):
    return lexkit_model(lane.preset, scheme, device=device)


def with_kernel(model: GPT, kernel: str) -> GPT:
    """``model(x)`` attends with ``kernel`` (train_step calls ``model(x)``; the model stays a GPT,
    so the step still applies its scheme's constraints)."""
    model.forward = functools.partial(type(model).forward, model, kernel=kernel)
    return model


def mfu(tokens_per_s: float, params: int, cfg, device: torch.device) -> float | None:
    """Model FLOPs utilisation of a training rate (:mod:`lexkit.core.provenance`: 6N + 12·L·d·T per
    token, bf16 peak of the device); None where the peak is unknown (the CPU)."""
    flops = provenance.flops_per_token(params, cfg.n_layers, cfg.d_model, cfg.train_len) * tokens_per_s
    return provenance.mfu(flops, provenance.device_name(device), training_dtype(device))


# -- training ----------------------------------------------------------------------------------
def time_steps(step, x: torch.Tensor, device: torch.device, lane: Lane) -> tuple[float, float, str | None]:
    """(warm-up seconds, tokens/s over the timed steps, the attention kernel that ran)."""

    def steps(count: int) -> float:
        start = time.perf_counter()
        for _ in range(count):
            step()
        sync(device)
        return time.perf_counter() - start

    warmup_s = steps(lane.warmup)
    with record_kernels() as ran:
        elapsed = steps(lane.steps)
    return warmup_s, lane.steps * x.numel() / elapsed, kernel_label(ran)


def batch(cfg, train_cfg, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(0)
    window = torch.randint(0, 256, (train_cfg.batch, cfg.train_len + 1), generator=gen).to(device)
    return window[:, :-1], window[:, 1:]


def bench_train(scheme: str, kernel: str, lane: Lane, device: torch.device, compiled: bool = False) -> dict:
    """The step ``lexkit train`` runs (:func:`lexkit.training.loop.train_step`, bf16 autocast on CUDA,
    the optimizer of :func:`lexkit.training.loop.make_optimizer`) with the given attention kernel; ``compiled``:
    its forward, loss and backward through :class:`lexkit.training.compiled.CompiledLoss`, as ``lexkit train
    --compile`` runs it (the warm-up steps hold the compile)."""
    model, train_cfg = build(scheme, lane, device)
    model = with_kernel(model.train(), kernel)
    optimizer, autocast = make_optimizer(model, train_cfg), device_autocast(device)
    x, y = batch(model.cfg, train_cfg, device)
    if compiled:
        dtype = training_dtype(device)  # bf16 on CUDA, autocast inside the compiled graph
        loss_of = CompiledLoss(model, device, None if dtype == "float32" else getattr(torch, dtype))
        warmup_s, rate, ran = time_steps(lambda: train_step_stats(model, optimizer, x, y, grad_clip=train_cfg.grad_clip,
                                                                  loss_of=loss_of), x, device, lane)
        extra = {"graphs": loss_of.graphs}
    else:
        warmup_s, rate, ran = time_steps(
            lambda: train_step(model, optimizer, x, y, grad_clip=train_cfg.grad_clip, autocast=autocast), x, device,
            lane)
        extra = {}
    return {**extra, "warmup_s": warmup_s, "tokens_per_s": rate, "ran": ran,
            "mfu": mfu(rate, model.num_params(), model.cfg, device), "params": model.num_params()}


def bench_train_xt(scheme: str, lane: Lane, device: torch.device) -> dict:
    """x-transformers at lexkit's size (:func:`builders.xt_model`: the same width, depth, heads, head dim,
    bias-free feed-forward, tied embedding, no absolute positions) through the same step, optimizer and batch
    as :func:`bench_train`."""
    lexkit, train_cfg = build(scheme, lane, device)
    torch.manual_seed(0)
    # attn_flash; rotary on half of each head (x-transformers' default), as this lane has always measured it
    model = xt_model(lexkit.cfg, flash=True, full_rotary=False).to(device).train()
    optimizer, autocast = make_optimizer(model, train_cfg), device_autocast(device)
    x, y = batch(lexkit.cfg, train_cfg, device)
    warmup_s, rate, _ = time_steps(
        lambda: train_step(model, optimizer, x, y, grad_clip=train_cfg.grad_clip, autocast=autocast), x, device, lane)
    params = count_params(model)
    return {"warmup_s": warmup_s, "tokens_per_s": rate, "ran": "x-transformers (attn_flash)",
            "mfu": mfu(rate, params, lexkit.cfg, device), "params": params}


# -- long evaluation ---------------------------------------------------------------------------
def bench_eval(scheme: str, kernel: str, pattern: str, n: int, lane: Lane, device: torch.device,
               stream: bool = False) -> dict:
    from lexkit.evaluate import evaluate

    model, _ = build(scheme, lane, device)
    model.eval()
    doc = random_document(n)
    reset_peak(device)
    times, row = [], {}
    for _ in range(1 if stream else lane.eval_runs):
        start = time.perf_counter()
        result = evaluate(model, [doc], [n], pattern, kernel=kernel, stream=stream)
        sync(device)
        times.append(time.perf_counter() - start)
        row = result["results"][0]
        if row.get("unavailable"):
            return {"error": row["unavailable"]}
    steady = statistics.median(times[1:]) if len(times) > 1 else times[0]
    return {"first_s": times[0], "steady_s": steady, "tokens_per_s": n / steady, "peak_gb": peak_gb(device),
            "ran": row.get("kernel"), "bpb": row["bpb"], "streamed": row["streamed"]}


def attempt(fn, *args, **kwargs) -> dict:
    """Run one measurement; a failure (out of memory, a refused combination) becomes a row."""
    try:
        return fn(*args, **kwargs)
    except (RuntimeError, ValueError, ImportError) as exc:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return {"error": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"}


# -- queue, run, report ------------------------------------------------------------------------
def queue(lane: Lane, window: int, xt: bool, cuda: bool = True, compiled: bool = False) -> list[tuple]:
    """(kind, cost estimate in s, labels) in priority order: the baseline and the paper's three
    schemes first (and rope through flex: on CUDA only, compiled flex has no backward on the CPU), with
    ``compiled`` each of those four again through the compiled step, x-transformers beside them, the long
    length before the shorter one, the stream, then the other bias schemes."""
    core, extra = SCHEMES[:3], SCHEMES[3:]
    local, block = f"window:{window}", f"bca:{window}"
    long, short = max(lane.eval_lengths), min(lane.eval_lengths)
    jobs = [("train", 40, {"scheme": BASELINE[0], "kernel": BASELINE[1]})]
    jobs += [("train", 60, {"scheme": s, "kernel": "auto"}) for s in core]
    jobs += [("train", 60, {"scheme": "rope", "kernel": "flex"})] if cuda else []
    if compiled:  # the same steps compiled (lexkit train --compile), beside the eager ones
        jobs += [("train", 120, {"scheme": BASELINE[0], "kernel": BASELINE[1], "compiled": True})]
        jobs += [("train", 120, {"scheme": s, "kernel": "auto", "compiled": True}) for s in core]
    if xt:
        jobs += [("xt", 45, {"scheme": s, "kernel": "x-transformers"}) for s in XT_SCHEMES]
    for n in (long, short):
        jobs += [("eval", 30, {"scheme": BASELINE[0], "kernel": BASELINE[1], "pattern": "causal", "n": n})]
        jobs += [("eval", 45, {"scheme": s, "kernel": "auto", "pattern": local, "n": n}) for s in core]
    jobs += [("eval", 45, {"scheme": s, "kernel": "auto", "pattern": block, "n": long}) for s in ("alibi", "xpos")]
    jobs += [("stream", 60, {"scheme": "alibi", "kernel": "auto", "pattern": local, "n": lane.stream_length})]
    jobs += [("train", 60, {"scheme": s, "kernel": "auto"}) for s in extra]
    jobs += [("eval", 45, {"scheme": s, "kernel": "auto", "pattern": local, "n": long}) for s in extra]
    return jobs


def run_job(kind: str, labels: dict, lane: Lane, device: torch.device) -> dict:
    if kind == "train":
        return attempt(bench_train, labels["scheme"], labels["kernel"], lane, device, labels.get("compiled", False))
    if kind == "xt":
        return attempt(bench_train_xt, labels["scheme"], lane, device)
    return attempt(bench_eval, labels["scheme"], labels["kernel"], labels["pattern"], labels["n"], lane, device,
                   stream=kind == "stream")


def run_all(budget: Budget, device: torch.device, lane: Lane, window: int, xt: bool,
            compiled: bool = False) -> tuple[list, list, list]:
    train, evals, skipped = [], [], []
    jobs = queue(lane, window, xt, cuda=device.type == "cuda", compiled=compiled)
    for i, (kind, cost, labels) in enumerate(jobs, 1):
        text = " ".join(f"{k}={v}" for k, v in {"job": kind, **labels}.items())
        if not budget.allows(cost):
            skipped.append(text)
            print(f"[{i}/{len(jobs)} {budget.elapsed():5.0f}s] skipped (time budget): {text}", flush=True)
            continue
        print(f"[{i}/{len(jobs)} {budget.elapsed():5.0f}s] {text} ...", flush=True)
        row = {"job": kind, **labels, **run_job(kind, labels, lane, device)}
        (train if kind in ("train", "xt") else evals).append(row)
        print(f"    {json.dumps(row)}", flush=True)
    return train, evals, skipped


def fmt(value, spec: str, missing: str = "—") -> str:
    return missing if value is None else format(value, spec)


def render(facts: dict, lane: Lane, train: list, evals: list, skipped: list, dry_run: bool) -> str:
    base = next((r.get("tokens_per_s") for r in train if r["scheme"] == BASELINE[0]), None)
    train_rows = []
    for r in train:
        head = [r["scheme"], r["kernel"] + (" (compiled)" if r.get("compiled") else "")]
        if "error" in r:
            train_rows.append(head + [r["error"]] + ["—"] * 5)
            continue
        train_rows.append(head + [r["ran"] or "—", f"{r['tokens_per_s']:,.0f}", fmt(r["mfu"], ".1%"),
                                  f"{r['tokens_per_s'] / base:.2f}x" if base else "—", f"{r['warmup_s']:.1f}"])
    base_eval = {r["n"]: r.get("tokens_per_s") for r in evals if r["scheme"] == BASELINE[0]}
    eval_rows = []
    for r in evals:
        head = [r["scheme"], r["pattern"], r["kernel"], f"{r['n']:,}"]
        if "error" in r:
            eval_rows.append(head + [r["error"]] + ["—"] * 6)
            continue
        ref = None if r["job"] == "stream" else base_eval.get(r["n"])
        eval_rows.append(head + [f"{r['ran']}{' (streamed)' if r['streamed'] else ''}", f"{r['tokens_per_s']:,.0f}",
                                 f"{r['tokens_per_s'] / ref:.2f}x" if ref else "—", f"{r['first_s']:.1f}",
                                 f"{r['steady_s']:.3f}", fmt(r["peak_gb"], ".2f")])
    return markdown([
        Heading("GPU benchmarks: the GPU lane (training per scheme, x-transformers, long evaluation)", 1),
        Text(f"Written by `python benchmarks/gpu.py{' --dry-run' if dry_run else ''}`. Model: {preset_text(lane)}."),
        *([Text("**Dry run on the CPU** (the `tiny` preset, short lengths): it checks the script, it measures "
                "nothing a GPU user needs.")] if dry_run else []),
        Heading("Machine"), table(["fact", "value"], [[k, v] for k, v in facts.items()]),
        Heading(f"Training (bf16 autocast on CUDA; tokens/s over {lane.steps} steps after {lane.warmup} warm-up "
                "steps)"),
        Text("MFU: model FLOPs (6N + 12·L·d·T per token, lexkit.core.provenance.flops_per_token) over the device's "
             "bf16 peak. `ran`: the attention kernel that actually ran (the flex ladder's rung, or `chunked` if flex "
             "could not be built)."),
        table(["scheme", "kernel", "ran", "tokens/s", "MFU", "vs none + SDPA causal", "warm-up s (compile)"],
              train_rows),
        Heading("Long evaluation (one sequence, `lexkit.evaluate.evaluate`, float32)"),
        table(["scheme", "pattern", "kernel", "n", "ran", "tokens/s", "vs none + SDPA causal", "first s", "steady s",
               "peak GB"], eval_rows),
        *([Heading("Skipped (time budget)"), Bullets(skipped)] if skipped else []),
    ])


def preset_text(lane: Lane) -> str:
    from lexkit.training.presets import get

    p = get(lane.preset)
    return (f"the `{lane.preset}` preset ({p['n_layers']} layers, d_model {p['d_model']}, {p['n_heads']} heads, "
            f"training length {p['train_len']}, batch {p['batch']})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks-gpu.md"))
    parser.add_argument("--budget", type=float, default=420.0, help="seconds within which measurements start")
    parser.add_argument("--dry-run", action="store_true", help="the whole lane on the CPU at the tiny preset")
    parser.add_argument("--compile", action="store_true", help="also the compiled step (lexkit train --compile) "
                        "for the baseline and the first three schemes")
    args = parser.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        print("benchmarks/gpu.py: no CUDA device here; nothing to measure (the CPU benchmark is benchmarks/run.py; "
              "--dry-run runs this script's code on the CPU)")
        return 0
    from lexkit.training.presets import get

    lane, device = (DRY, torch.device("cpu")) if args.dry_run else (GPU, torch.device("cuda"))
    xt = installed("x-transformers") is not None
    if not xt:
        print("x-transformers is not installed: its rows are left out (pip install -e '.[bench]')", flush=True)
    train, evals, skipped = run_all(Budget(args.budget), device, lane, window=get(lane.preset)["train_len"], xt=xt,
                                    compiled=args.compile)
    info = cpu_facts(torch.get_num_threads()) if args.dry_run else gpu_facts(device)
    write_report(args.out, render(info, lane, train, evals, skipped, args.dry_run),
                 {"machine": info, "lane": dataclasses.asdict(lane), "dry_run": args.dry_run, "train": train,
                  "eval": evals, "skipped": skipped})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
