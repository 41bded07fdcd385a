"""Training speed: bytes/s per contender in alternating repetitions, ATen operators per step, and
the model FLOPs per byte against this machine's float32 matmul rate."""

from __future__ import annotations

import statistics
import time

import torch

from builders import count_params, xt_model
from contenders import BATCH, D_MODEL, N_LAYERS, SCHEMES, TRAIN_LEN, Contender, Settings, contenders, model_config
from lexkit.core import provenance
from lexkit.model.gpt import VOCAB


def batches(count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``count`` batches of random bytes at the training length, the same for every contender."""
    gen = torch.Generator().manual_seed(0)
    out = []
    for _ in range(count):
        window = torch.randint(0, 256, (BATCH, TRAIN_LEN + 1), generator=gen)
        out.append((window[:, :-1], window[:, 1:]))
    return out


def timed_steps(contender: Contender, data: list) -> float:
    """Bytes per second over ``data`` (one training step per batch)."""
    start = time.perf_counter()
    for x, y in data:
        contender.step(x, y)
    return sum(x.numel() for x, _ in data) / (time.perf_counter() - start)


def ops_per_step(contender: Contender, batch: tuple) -> int:
    """ATen operators one training step dispatches: a load-independent measure of per-op
    overhead (each costs a dispatch and, for big tensors, a thread-pool barrier)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        contender.step(*batch)
    return sum(e.count for e in prof.key_averages() if e.key.startswith("aten::"))


def matmul_gflops(size: int = 1024, repeats: int = 8, *, shape: tuple[int, int, int] | None = None) -> float:
    """float32 size x size @ size x size rate on torch's current threads, GFLOP/s; ``shape`` (m, k, n):
    an [m, k] @ [k, n] multiply instead (a model's own shape)."""
    m, k, n = shape or (size, size, size)
    a, b = torch.randn(m, k), torch.randn(k, n)
    a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * m * k * n * repeats / (time.perf_counter() - start) / 1e9


def bench_training(settings: Settings, log) -> dict:
    """Per scheme: bytes/s per contender per repetition, alternating contenders (A, B, C, then
    C, B, A, ...), plus the matmul rate measured in the same rotation."""
    data = batches(settings.warmup + settings.steps)
    warm, timed = data[: settings.warmup], data[settings.warmup :]
    result = {"matmul_gflops": [], "schemes": {}}
    for scheme in SCHEMES:
        entrants = contenders(scheme, settings)
        for contender in entrants:
            for x, y in warm[:-1]:
                contender.step(x, y)
        ops = {c.name: ops_per_step(c, warm[-1]) for c in entrants}  # the last warmup step
        rates = {c.name: [] for c in entrants}
        for rep in range(settings.reps):
            for contender in entrants if rep % 2 == 0 else entrants[::-1]:
                rates[contender.name].append(timed_steps(contender, timed))
            result["matmul_gflops"].append(matmul_gflops())
        params = {c.name: count_params(c.model) for c in entrants}
        result["schemes"][scheme] = {"bytes_per_s": rates, "params": params, "ops_per_step": ops,
                                     "xt_default_params": count_params(xt_model(model_config(scheme), matched=False))}
        log(f"train {scheme}: " + ", ".join(f"{k} {statistics.median(v):,.0f} B/s" for k, v in rates.items()))
    return result


def summarize_training(raw: dict) -> dict:
    """Per scheme: median bytes/s per contender, and lexkit's ratios as medians of per-repetition
    ratios (load from other jobs falls on both sides of a ratio alike)."""
    out = {}
    for scheme, row in raw["schemes"].items():
        rates = row["bytes_per_s"]
        lex = rates["lexkit"]
        summary = {name: statistics.median(v) for name, v in rates.items()}
        ratios = {name: statistics.median(a / b for a, b in zip(lex, v))
                  for name, v in rates.items() if name != "lexkit"}
        out[scheme] = {"median_bytes_per_s": summary, "ratio_lexkit_over": ratios, "params": row["params"],
                       "ops_per_step": row["ops_per_step"], "xt_default_params": row["xt_default_params"]}
    return out


def train_flops_per_byte(n_layers: int = N_LAYERS, d: int = D_MODEL, vocab: int = VOCAB, ctx: int = TRAIN_LEN) -> dict:
    """Matmul FLOPs per token (= per byte) of one training step: :func:`lexkit.core.provenance.flops_per_token`
    (6N + 12·L·d·T, PaLM's convention: full ctx, no causal halving) with N the weights of the linear maps,
    counted explicitly: per layer qkv 3d², output d², MLP 8d², and the tied head d·V. ``forward`` is a
    third of it (the backward costs twice the forward)."""
    linear = n_layers * 12 * d * d + d * vocab
    train = provenance.flops_per_token(linear, n_layers, d, ctx)
    return {"linear_weights": linear, "forward": train // 3, "train": train}


def linear_weights(model: torch.nn.Module) -> int:
    """Weights in nn.Linear maps (a check on the explicit count; the tied head counts once)."""
    return sum(m.in_features * m.out_features for m in model.modules() if isinstance(m, torch.nn.Linear))
