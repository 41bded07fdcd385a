#!/usr/bin/env python
"""lexkit against x-transformers on this CPU, side by side in one run (issue 6).

    python benchmarks/run.py [--quick] [--out docs/benchmarks.md]

1. Training bytes/s at the ``small`` preset (4 layers, d_model 128, 4 heads, length 128, batch 32,
   AdamW) for alibi, rope and xpos. Every contender runs the same loop (forward, float32
   cross-entropy, backward, clip 1.0, AdamW step) on the same batches; repetitions alternate
   between contenders (A, B, C, then C, B, A, ...) and the ratios are medians of per-repetition
   ratios, so load from other jobs falls on both sides alike.
2. Evaluation of one sequence of n bytes (4,096 .. 65,536) under ``window:128`` and ``bca:128``:
   wall time and peak memory, each measurement in a fresh child process (peak = the child's
   VmHWM, its peak resident memory; the child's address space is capped so that a runaway
   fails cleanly). lexkit runs through :func:`lexkit.evaluate.evaluate` itself; x-transformers runs its dense local mask
   (``attn_max_attend_past``) at the lengths that fit.
3. Model FLOPs per byte and the fraction of this machine's float32 matmul rate that training
   reaches (the matmul rate is measured in the same rotation as training).

Results go to ``--out`` (markdown) and a JSON file next to it.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from lexkit.model import VOCAB
from lexkit.presets import get as preset

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
THREADS = 2  # the default: the 2-core machine
SCHEMES = ("alibi", "rope", "xpos")
SMALL = preset("small")  # the size both libraries are measured at
BATCH, TRAIN_LEN, D_MODEL, N_LAYERS, N_HEADS = (SMALL[k] for k in ("batch", "train_len", "d_model", "n_layers", "n_heads"))
WINDOW = TRAIN_LEN  # W of window:W and bca:W
PATTERNS = (f"window:{WINDOW}", f"bca:{WINDOW}")
MB = 1024 * 1024


@dataclasses.dataclass
class Settings:
    warmup: int  # training steps per contender before timing (>= 1; the last one is profiled)
    reps: int  # timed repetitions per contender (alternating)
    steps: int  # training steps per repetition
    xt_variants: tuple[str, ...]  # x-transformers configurations timed in training (XT_VARIANTS)
    lengths: tuple[int, ...]  # lexkit evaluation lengths
    xt_lengths: tuple[int, ...]  # x-transformers evaluation lengths (its n x n mask must fit)
    eval_reps: int  # child processes per lexkit auto-kernel measurement
    eval_runs: int  # evaluations per lexkit child (the first one is reported apart)
    xt_runs: int  # evaluations per x-transformers child
    eval_schemes: tuple[str, ...]  # schemes evaluated with the auto kernel (window; alibi also bca)
    flex: bool  # also measure kernel="flex" (alibi, once per length and pattern)


QUICK = Settings(warmup=2, reps=2, steps=1, xt_variants=("x-transformers",), lengths=(4096, 16384),
                 xt_lengths=(4096,), eval_reps=1, eval_runs=2, xt_runs=1, eval_schemes=("alibi",), flex=False)
FULL = Settings(warmup=2, reps=4, steps=3,
                xt_variants=("x-transformers", "x-transformers flash", "x-transformers defaults"),
                lengths=(4096, 16384, 65536), xt_lengths=(4096, 8192), eval_reps=2, eval_runs=2, xt_runs=2,
                eval_schemes=SCHEMES, flex=True)


# -- the machine -------------------------------------------------------------------------------
def machine_facts(threads: int) -> dict:
    import lexkit
    from importlib.metadata import PackageNotFoundError, version

    try:
        xt_version = version("x-transformers")
    except PackageNotFoundError:
        xt_version = None
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": threads,
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3, 1),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "lexkit": lexkit.__version__,
        "x_transformers": xt_version,
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def matmul_gflops(size: int = 1024, repeats: int = 8) -> float:
    """float32 size x size @ size x size rate on torch's current threads, GFLOP/s."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e9


# -- the contenders ----------------------------------------------------------------------------
def lexkit_model(scheme: str):
    from lexkit.model import GPT
    from lexkit.train import configs

    model_cfg, train_cfg = configs("small", scheme)
    return GPT(model_cfg), train_cfg


XT_POSITION = {
    "alibi": dict(alibi_pos_bias=True),
    "rope": dict(rotary_pos_emb=True, rotary_emb_dim=D_MODEL // N_HEADS),
    "xpos": dict(rotary_xpos=True, rotary_emb_dim=D_MODEL // N_HEADS),
}
XT_README = {"alibi": dict(alibi_pos_bias=True), "rope": dict(rotary_pos_emb=True), "xpos": dict(rotary_xpos=True)}

#: what makes x-transformers' network the size and shape of lexkit's (see CONFIG_NOTES)
XT_MATCH = dict(attn_dim_head=D_MODEL // N_HEADS, ff_no_bias=True)

#: the x-transformers configurations training is timed with: name -> xt_model keywords
XT_VARIANTS = {
    "x-transformers": {},  # lexkit's network, x-transformers' default attention path
    "x-transformers flash": {"flash": True},  # lexkit's network, attn_flash=True (SDPA)
    "x-transformers defaults": {"matched": False},  # its README configuration: a bigger network
}


def xt_model(scheme: str, *, matched: bool = True, flash: bool = False, max_attend_past: int | None = None):
    """x-transformers at the small preset's size; ``matched=False``: as its README configures it."""
    from x_transformers import Decoder, TransformerWrapper

    layer_args = dict(dim=D_MODEL, depth=N_LAYERS, heads=N_HEADS)
    layer_args.update(XT_MATCH | XT_POSITION[scheme] if matched else XT_README[scheme])
    if flash:
        layer_args["attn_flash"] = True
    if max_attend_past is not None:
        layer_args["attn_max_attend_past"] = max_attend_past
    # matched: no absolute table (alibi would otherwise add one), embedding tied as lexkit's
    wrapper_args = dict(use_abs_pos_emb=False, tie_embedding=True) if matched else {}
    return TransformerWrapper(num_tokens=VOCAB, max_seq_len=TRAIN_LEN, attn_layers=Decoder(**layer_args), **wrapper_args)


def count_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def adamw_like_lexkit(model: torch.nn.Module, train_cfg) -> torch.optim.AdamW:
    """AdamW with lexkit's groups (weight decay on matrices), betas and learning rate."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": train_cfg.weight_decay}, {"params": other, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=train_cfg.lr, betas=(0.9, 0.95))


class Trainer:
    """One contender: a model, its optimizer and the training step lexkit's ``train`` runs."""

    def __init__(self, name: str, model: torch.nn.Module, optimizer, grad_clip: float, after_step=None):
        self.name, self.model, self.optimizer = name, model.train(), optimizer
        self.grad_clip, self.after_step = grad_clip, after_step

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        logits = self.model(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        value = loss.item()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()
        if self.after_step is not None:
            self.after_step()
        return value


def trainers(scheme: str, settings: Settings) -> list[Trainer]:
    from lexkit.train import _optimizer

    torch.manual_seed(0)
    model, train_cfg = lexkit_model(scheme)
    out = [Trainer("lexkit", model, _optimizer(model, train_cfg), train_cfg.grad_clip, model.scheme.constrain_)]
    for name in settings.xt_variants:
        torch.manual_seed(0)
        xt = xt_model(scheme, **XT_VARIANTS[name])
        out.append(Trainer(name, xt, adamw_like_lexkit(xt, train_cfg), train_cfg.grad_clip))
    return out


# -- 1. training -------------------------------------------------------------------------------
def batches(count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    out = []
    for _ in range(count):
        window = torch.randint(0, 256, (BATCH, TRAIN_LEN + 1), generator=gen)
        out.append((window[:, :-1], window[:, 1:]))
    return out


def timed_steps(trainer: Trainer, data: list) -> float:
    """Bytes per second over ``data`` (one training step per batch)."""
    start = time.perf_counter()
    for x, y in data:
        trainer.step(x, y)
    return sum(x.numel() for x, _ in data) / (time.perf_counter() - start)


def ops_per_step(trainer: Trainer, batch: tuple) -> int:
    """ATen operators one training step dispatches: a load-independent measure of per-op
    overhead (each costs a dispatch and, for big tensors, a thread-pool barrier)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.step(*batch)
    return sum(e.count for e in prof.key_averages() if e.key.startswith("aten::"))


def bench_training(settings: Settings, log) -> dict:
    """Per scheme: bytes/s per contender per repetition, alternating contenders, plus the matmul
    rate measured in the same rotation."""
    data = batches(settings.warmup + settings.steps)
    warm, timed = data[: settings.warmup], data[settings.warmup :]
    result = {"matmul_gflops": [], "schemes": {}}
    for scheme in SCHEMES:
        contenders = trainers(scheme, settings)
        for trainer in contenders:
            for x, y in warm[:-1]:
                trainer.step(x, y)
        ops = {t.name: ops_per_step(t, warm[-1]) for t in contenders}  # the last warmup step
        rates = {t.name: [] for t in contenders}
        for rep in range(settings.reps):
            order = contenders if rep % 2 == 0 else contenders[::-1]
            for trainer in order:
                rates[trainer.name].append(timed_steps(trainer, timed))
            result["matmul_gflops"].append(matmul_gflops())
        params = {t.name: count_params(t.model) for t in contenders}
        result["schemes"][scheme] = {"bytes_per_s": rates, "params": params, "ops_per_step": ops,
                                     "xt_default_params": count_params(xt_model(scheme, matched=False))}
        log(f"train {scheme}: " + ", ".join(f"{k} {statistics.median(v):,.0f} B/s" for k, v in rates.items()))
    return result


def summarize_training(raw: dict) -> dict:
    out = {}
    for scheme, row in raw["schemes"].items():
        rates = row["bytes_per_s"]
        lex = rates["lexkit"]
        summary = {name: statistics.median(v) for name, v in rates.items()}
        ratios = {name: statistics.median(a / b for a, b in zip(lex, v)) for name, v in rates.items() if name != "lexkit"}
        out[scheme] = {"median_bytes_per_s": summary, "ratio_lexkit_over": ratios, "params": row["params"],
                       "ops_per_step": row["ops_per_step"], "xt_default_params": row["xt_default_params"]}
    return out


# -- 3. FLOPs ----------------------------------------------------------------------------------
def train_flops_per_byte(n_layers: int = N_LAYERS, d: int = D_MODEL, vocab: int = VOCAB, ctx: int = TRAIN_LEN) -> dict:
    """Matmul FLOPs per token (= per byte) of one training step, counted explicitly.

    Forward: 2 FLOPs per weight of every linear map (per layer qkv 3d², output d², MLP 8d²;
    the tied head d·V) plus attention's QKᵀ and PV, 2·2·ctx·d per layer (full ctx, PaLM's
    convention: no causal halving). Training = 3 x forward (backward = 2 x forward)."""
    linear = n_layers * 12 * d * d + d * vocab
    attention = n_layers * 2 * 2 * ctx * d
    forward = 2 * linear + attention
    return {"linear_weights": linear, "forward": forward, "train": 3 * forward}


def linear_weights(model: torch.nn.Module) -> int:
    """Weights in nn.Linear maps (a check on the explicit count; the tied head counts once)."""
    return sum(m.in_features * m.out_features for m in model.modules() if isinstance(m, torch.nn.Linear))


# -- 2. long evaluation (child processes) ------------------------------------------------------
def eval_jobs(settings: Settings) -> list[dict]:
    """Every measurement, in an order that interleaves lengths (so 4,096 and 65,536 see alike
    load: repetitions walk the lengths up, then down). Flex and x-transformers run once."""
    jobs = []
    for rep in range(settings.eval_reps):
        for n in settings.lengths if rep % 2 == 0 else settings.lengths[::-1]:
            jobs += lexkit_jobs(settings, n, flex=settings.flex and rep == 0)
        if rep == 0:
            jobs += [xt_job(settings, n) for n in settings.xt_lengths]
    return jobs


def lexkit_jobs(settings: Settings, n: int, flex: bool) -> list[dict]:
    """alibi under window and bca; the other schemes under window (the same kernel cost)."""
    jobs = []
    for scheme in settings.eval_schemes:
        for pattern in PATTERNS if scheme == "alibi" else PATTERNS[:1]:
            job = {"lib": "lexkit", "scheme": scheme, "pattern": pattern, "n": n}
            jobs.append({**job, "kernel": "auto", "runs": settings.eval_runs})
            if flex and scheme == "alibi":
                jobs.append({**job, "kernel": "flex", "runs": 2})  # compile + one steady run
    return jobs


def xt_job(settings: Settings, n: int) -> dict:
    return {"lib": "x-transformers", "scheme": "alibi", "pattern": PATTERNS[0], "kernel": "dense local mask",
            "n": n, "runs": settings.xt_runs}


def run_child(job: dict, guard_gb: float, timeout: float) -> dict:
    """Run one measurement in a fresh interpreter under an address-space cap."""
    limit = int(guard_gb * 1024**3)

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS="1", OMP_NUM_THREADS=str(job["threads"]))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(job)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=cap, env=env)
    except subprocess.TimeoutExpired:
        return {**job, "error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return {**job, **json.loads(line)}
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {**job, "error": f"exit {proc.returncode}: {tail[:200]}"}


def maxrss_mb() -> float:
    """This process's peak resident memory, MB. VmHWM belongs to the address space, which exec
    replaces; ru_maxrss would carry over the parent's resident size at fork."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / MB if sys.platform == "darwin" else peak / 1024  # bytes on macOS, kB elsewhere


def child_main(job: dict) -> None:
    """Build the model, time ``runs`` evaluations of one n-byte sequence, print one JSON line."""
    torch.set_num_threads(job["threads"])
    torch.manual_seed(0)
    doc = bytes(torch.randint(0, 256, (job["n"],), dtype=torch.uint8).tolist())
    evaluate_once = lexkit_evaluator(job, doc) if job["lib"] == "lexkit" else xt_evaluator(job, doc)
    baseline = maxrss_mb()
    times = []
    try:
        for _ in range(job["runs"]):
            start = time.perf_counter()
            evaluate_once()
            times.append(time.perf_counter() - start)
    except (RuntimeError, MemoryError, ValueError) as exc:
        out = {"error": short_error(exc)}
    else:
        steady = statistics.median(times[1:]) if len(times) > 1 else times[0]
        out = {"first_s": times[0], "steady_s": steady, "bytes_per_s": job["n"] / steady}
    out.update(baseline_mb=baseline, peak_mb=maxrss_mb())
    print(json.dumps(out))


def short_error(exc: BaseException) -> str:
    text = str(exc)
    if "can't allocate memory" in text or isinstance(exc, MemoryError):
        return "out of memory under the address-space cap"
    return f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else ''}"


def lexkit_evaluator(job: dict, doc: bytes):
    from lexkit.evaluate import evaluate

    model, _ = lexkit_model(job["scheme"])
    model.eval()
    return lambda: evaluate(model, [doc], [job["n"]], job["pattern"], kernel=job["kernel"])


def xt_evaluator(job: dict, doc: bytes):
    """The same work as lexkit's evaluate at one window: forward, float64 NLL."""
    from lexkit.data import encode

    model = xt_model(job["scheme"], max_attend_past=int(job["pattern"].split(":")[1]) - 1).eval()
    tokens = encode(doc).to(torch.int64)
    x, y = tokens[None, :-1], tokens[1:]

    def run() -> float:
        with torch.inference_mode():
            return F.cross_entropy(model(x).double().flatten(0, 1), y).item()

    return run


def bench_eval(settings: Settings, threads: int, guard_gb: float, timeout: float, log) -> list[dict]:
    rows = []
    for job in eval_jobs(settings):
        row = run_child({**job, "threads": threads}, guard_gb, timeout)
        rows.append(row)
        what = f"{row['lib']} {row['scheme']} {row['pattern']} {row['kernel']} n={row['n']:,}"
        if "error" in row:
            log(f"eval {what}: {row['error']}")
        else:
            log(f"eval {what}: {row['steady_s']:.2f} s (first {row['first_s']:.2f} s), {row['bytes_per_s']:,.0f} B/s, "
                f"peak {row['peak_mb']:,.0f} MB")
    return rows


def summarize_eval(rows: list[dict]) -> list[dict]:
    """One row per (lib, scheme, pattern, kernel, n): medians over repetitions."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["lib"], row["scheme"], row["pattern"], row["kernel"], row["n"]), []).append(row)
    out = []
    for (lib, scheme, pattern, kernel, n), items in groups.items():
        ok = [r for r in items if "error" not in r]
        entry = {"lib": lib, "scheme": scheme, "pattern": pattern, "kernel": kernel, "n": n, "measurements": len(items)}
        if ok:  # times: medians; memory: the worst repetition
            entry.update({key: statistics.median(r[key] for r in ok)
                          for key in ("first_s", "steady_s", "bytes_per_s", "baseline_mb")})
            entry["peak_mb"] = max(r["peak_mb"] for r in ok)
        else:
            entry.update(error=items[0]["error"], peak_mb=max(r.get("peak_mb", 0) for r in items))
        out.append(entry)
    return sorted(out, key=lambda e: (e["lib"] != "lexkit", e["scheme"], e["pattern"], e["kernel"], e["n"]))


# -- 4. targets --------------------------------------------------------------------------------
def targets(training: dict, evals: list[dict], settings: Settings) -> list[dict]:
    out = []
    for scheme, row in training.items():
        ratio = row["ratio_lexkit_over"]["x-transformers"]
        out.append({"target": f"training {scheme}: lexkit >= 1.5x x-transformers bytes/s",
                    "measured": f"{ratio:.2f}x", "pass": ratio >= 1.5})
    find = {(e["scheme"], e["pattern"], e["n"]): e for e in evals if e["lib"] == "lexkit" and e["kernel"] == "auto"}
    small, big = min(settings.lengths), max(settings.lengths)
    for scheme, pattern, _ in sorted(k for k in find if k[2] == big):
        lo, hi = find.get((scheme, pattern, small)), find[(scheme, pattern, big)]
        if lo is None or "error" in lo or "error" in hi:
            out.append({"target": f"eval {scheme} {pattern}: ran at {small:,} and {big:,}", "measured": "error", "pass": False})
            continue
        ratio = hi["bytes_per_s"] / lo["bytes_per_s"]
        out.append({"target": f"eval {scheme} {pattern}: bytes/s at {big:,} >= 0.8x bytes/s at {small:,}",
                    "measured": f"{ratio:.2f}x", "pass": ratio >= 0.8})
        out.append({"target": f"eval {scheme} {pattern}: peak memory at {big:,} <= 1.5 GB",
                    "measured": f"{hi['peak_mb'] / 1024:.2f} GB", "pass": hi["peak_mb"] <= 1.5 * 1024})
    return out


# -- report ------------------------------------------------------------------------------------
CONFIG_NOTES = """\
- Both sides: 4 layers, d_model 128, 4 heads of 32, MLP 4x with GELU, pre-LN, final LN, tied
  input/output embedding over 257 tokens, no absolute position table; training length 128,
  batch 32; AdamW (lr 2e-3, betas 0.9/0.95, weight decay 0.1 on matrices), gradient clipping
  1.0, float32 cross-entropy, `loss.item()` every step (as `lexkit train`); random bytes, the
  same batches for both. `torch.set_num_threads({threads})` for both.
- x-transformers: `TransformerWrapper(num_tokens=257, max_seq_len=128, use_abs_pos_emb=False,
  tie_embedding=True, attn_layers=Decoder(dim=128, depth=4, heads=4, attn_dim_head=32,
  ff_no_bias=True, <scheme flag>))`, scheme flag `alibi_pos_bias=True`,
  `rotary_pos_emb=True, rotary_emb_dim=32` or `rotary_xpos=True, rotary_emb_dim=32`.
  Its defaults differ: 64-dim heads (twice the attention width: {default_params} parameters),
  biased MLP, an absolute position table even with ALiBi, rotary on half of each head.
- Remaining differences: x-transformers projects q, k, v with three matrices (lexkit one fused
  matrix), its LayerNorm has no bias (1,152 fewer parameters), its rotary pairs are interleaved
  (lexkit rotate-half) and its xPos decay is centred at n/2; "x-transformers" attends with its
  own einsum/softmax path (the default), "x-transformers flash" with `attn_flash=True` (SDPA).
  "x-transformers defaults" is its README configuration at the same dim/depth/heads (not the
  same size; shown for reference). The training targets compare with "x-transformers".
- Evaluation: one sequence of n random bytes, untrained weights (cost does not depend on them),
  lexkit through `lexkit.evaluate.evaluate` (forward + float64 NLL), x-transformers through the
  same forward + float64 NLL with `attn_max_attend_past=127` (it keeps distance <= 127: the same
  keys as lexkit's `window:128`), an O(n²) dense mask, so only at the lengths that fit.
  Each measurement runs in a fresh process capped at {guard} GB of address space; "first" is the
  first evaluation (for flex: block mask + compilation), "steady" the median of the rest. Peak
  is the child's peak RSS (VmHWM), the worst repetition; "above base" subtracts the RSS after
  imports and model build. Times and bytes/s are medians over repetitions.
"""


def md_table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def training_table(training: dict, flops: dict, gflops: float) -> str:
    names = list(next(iter(training.values()))["median_bytes_per_s"])
    headers = ["scheme"] + [f"{n} B/s" for n in names] + [f"lexkit / {n}" for n in names[1:]]
    headers += ["parameters", "ATen ops per step", "lexkit % of matmul rate"]
    rows = []
    for scheme, row in training.items():
        rates = row["median_bytes_per_s"]
        achieved = rates["lexkit"] * flops["train"] / 1e9
        rows.append([scheme] + [f"{rates[n]:,.0f}" for n in names]
                    + [f"**{row['ratio_lexkit_over'][n]:.2f}x**" for n in names[1:]]
                    + [" / ".join(f"{row['params'][n]:,}" for n in names),
                       " / ".join(f"{row['ops_per_step'][n]:,}" for n in names),
                       f"{100 * achieved / gflops:.1f}% ({achieved:.1f} GFLOP/s)"])
    return md_table(headers, rows)


def eval_table(evals: list[dict]) -> str:
    headers = ["library", "scheme", "pattern", "kernel", "n", "first s", "steady s", "bytes/s", "peak MB", "above base MB"]
    rows = []
    for e in evals:
        head = [e["lib"], e["scheme"], e["pattern"], e["kernel"], f"{e['n']:,}"]
        if "error" in e:
            rows.append(head + ["—", "—", e["error"], f"{e['peak_mb']:,.0f}", "—"])
        else:
            rows.append(head + [f"{e['first_s']:.2f}", f"{e['steady_s']:.2f}", f"{e['bytes_per_s']:,.0f}",
                                f"{e['peak_mb']:,.0f}", f"{e['peak_mb'] - e['baseline_mb']:,.0f}"])
    return md_table(headers, rows)


def eval_ratio_table(evals: list[dict]) -> str:
    """lexkit auto against x-transformers local at the same n (window), where both ran."""
    xt = {e["n"]: e for e in evals if e["lib"] == "x-transformers" and "error" not in e}
    rows = []
    for e in evals:
        if e["lib"] == "lexkit" and e["kernel"] == "auto" and e["scheme"] == "alibi" and e["pattern"] == PATTERNS[0] \
                and e["n"] in xt and "error" not in e:
            other = xt[e["n"]]
            rows.append([f"{e['n']:,}", f"{other['steady_s'] / e['steady_s']:.1f}x", f"{other['peak_mb'] / e['peak_mb']:.1f}x"])
    if not rows:
        return "_(no length where both ran)_"
    return md_table(["n", "x-transformers time / lexkit time", "x-transformers peak / lexkit peak"], rows)


def load_note(machine: dict) -> str:
    """A warning when other work shared the cores: every multi-threaded operator then waits
    at its barrier for a descheduled thread, which penalises many small operators most."""
    own = machine["threads"]  # this benchmark's own threads count in the load at the end
    load = max(machine["load_average_start"][0], machine.get("load_average_end", [0])[0] - own)
    if load < 0.5 * machine["cores"]:
        return ""
    return (f"\n\n**The machine was shared** (other work: a 1-minute load average up to {load:.1f} on {machine['cores']} cores): "
            "absolute numbers are low and noisy, and code that dispatches many small operators is "
            "penalised more than its share. The interleaved ratios are the numbers to read.")


def render(result: dict) -> str:
    m, flops = result["machine"], result["flops_per_byte"]
    facts = md_table(["fact", "value"], [[k.replace("_", " "), v] for k, v in m.items()])
    t = result["targets"]
    target_rows = [[x["target"], x["measured"], "PASS" if x["pass"] else "**MISS**"] for x in t]
    gflops = result["matmul_gflops"]
    return "\n\n".join([
        "# Benchmarks: lexkit and x-transformers side by side",
        f"Written by `python benchmarks/run.py{' --quick' if result['quick'] else ''}` "
        f"({result['elapsed_s'] / 60:.1f} min). Both libraries ran in the same process (training) or in "
        "alternating child processes (evaluation), interleaved, so the ratios hold better than the "
        "absolute numbers on a shared machine.",
        "## Machine\n\n" + facts + load_note(m),
        "## Targets\n\n" + md_table(["target", "measured", "result"], target_rows),
        "## Training (small preset, bytes/s, median of alternating repetitions)\n\n"
        + training_table(result["training"], flops, gflops)
        + f"\n\nRatios are medians of per-repetition ratios. FLOPs per byte (one training step, "
          f"explicit count): {flops['train'] / 1e6:.2f} MFLOP ({flops['linear_weights']:,} linear weights, "
          f"lexkit's nn.Linear count {result['lexkit_linear_weights']:,}; attention at length {TRAIN_LEN}). "
          f"Measured float32 matmul rate (1024³, {m['threads']} threads, median over the rotation): {gflops:.1f} GFLOP/s.",
        "## Long evaluation (one sequence, small model)\n\n" + eval_table(result["eval"])
        + "\n\n### lexkit (alibi, window, auto kernel) against x-transformers' local mask\n\n"
        + eval_ratio_table(result["eval"]),
        ANALYSIS.read_text().strip() if ANALYSIS.is_file() else "",
        "## How the configurations match\n\n"
        + CONFIG_NOTES.format(default_params=", ".join(f"{s} {r['xt_default_params']:,}" for s, r in result["training"].items()),
                              guard=result["mem_guard_gb"], threads=m["threads"]),
    ]) + "\n"


ANALYSIS = Path(__file__).with_name("analysis.md")  # the profile behind the numbers, kept by hand


# -- main --------------------------------------------------------------------------------------
def log(message: str) -> None:
    print(message, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer steps, only 4,096 and 16,384 bytes")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"), help="markdown report (JSON next to it)")
    parser.add_argument("--mem-guard-gb", type=float, default=12.0, help="address-space cap of each eval child")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per eval child")
    parser.add_argument("--threads", type=int, default=THREADS, help="torch threads for both libraries")
    parser.add_argument("--skip-eval", action="store_true", help="training and FLOPs only")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(json.loads(args.child))
        return 0
    torch.set_num_threads(args.threads)
    settings = QUICK if args.quick else FULL
    began = time.perf_counter()
    result = {"quick": args.quick, "settings": dataclasses.asdict(settings), "machine": machine_facts(args.threads),
              "mem_guard_gb": args.mem_guard_gb}
    raw = bench_training(settings, log)
    result["training_raw"] = raw
    result["training"] = summarize_training(raw)
    result["matmul_gflops"] = statistics.median(raw["matmul_gflops"])
    result["flops_per_byte"] = train_flops_per_byte()
    result["lexkit_linear_weights"] = linear_weights(lexkit_model("alibi")[0])
    rows = [] if args.skip_eval else bench_eval(settings, args.threads, args.mem_guard_gb, args.timeout, log)
    result["eval_raw"], result["eval"] = rows, summarize_eval(rows)
    result["targets"] = targets(result["training"], result["eval"], settings)
    result["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    result["elapsed_s"] = time.perf_counter() - began
    for t in result["targets"]:
        log(f"{'PASS' if t['pass'] else 'MISS'}  {t['target']}: {t['measured']}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(result))
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    log(f"wrote {out} and {out.with_suffix('.json')} ({result['elapsed_s'] / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
