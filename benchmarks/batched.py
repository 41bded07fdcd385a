"""Three seeds trained as one batched model (lexkit.training.batched) against the same three seeds stepped one
after another, on ONE thread (as a study or sweep worker runs), side by side: bytes/s of training
(every seed's bytes), at table G's size for the hunt's layouts and at the small and tiny presets.
Both ways start from the same weights and step on the same batches (prebuilt: batch building is the
same cost either way, reported beside); repetitions alternate which way goes first, and the ratio is
the median of the per-repetition ratios.

    python benchmarks/batched.py --out docs/benchmarks-batched.md
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

from builders import lexkit_model
from common import cpu_facts, table, write_report
from lexkit.data import corpus as data
from lexkit.data import mix
from lexkit.documents.blocks import Heading, Text
from lexkit.documents.render import markdown
from lexkit.study.recipe import RECIPE
from lexkit.training import batched
from lexkit.training.loop import make_optimizer, train_step

SEEDS = (0, 1, 2)
#: (label, preset, batch, layout): table G's recipe for the hunt's layouts (A0, A3, A7 of
#: benchmarks/sweeps/hunt-confirm.json), then the small and tiny presets at their own batch
CASES = [
    ("table G: rope (uniform)", RECIPE.preset, RECIPE.batch, None),
    ("table G: A0 hwfa:W=16,shift=0.5", RECIPE.preset, RECIPE.batch, "hwfa:W=16,shift=0.5"),
    ("table G: A3 +kshift global", RECIPE.preset, RECIPE.batch, "rope@window:16+shift;none@causal+logn+shift+kshift"),
    ("table G: A7 +diff global", RECIPE.preset, RECIPE.batch, "rope@window:16+shift;none@causal+logn+shift+diff"),
    ("small: hwfa:W=16,shift=0.5", "small", None, "hwfa:W=16,shift=0.5"),
    ("tiny: rope (uniform)", "tiny", None, None),
]


def settings(batch: int | None, layout: str | None) -> dict:
    """The case's model and training settings beyond its preset: table G's recipe (its token shift on a
    layout that shifts nothing itself)."""
    shift = RECIPE.token_shift if layout is None or "shift" not in layout else 0.0
    return dict(batch=batch, layout=layout, token_shift=shift, mix=RECIPE.mix)


def measure(label: str, preset: str, batch: int | None, layout: str | None, stream, reps: int, steps: int) -> dict:
    built = [lexkit_model(preset, "rope", seed=seed, **settings(batch, layout)) for seed in SEEDS]
    models, train_cfg = [model.train() for model, _ in built], built[0][1]
    model_cfg = models[0].cfg
    n, b = model_cfg.train_len, train_cfg.batch
    kernel = batched.probe(models, model_cfg)
    apart = [copy.deepcopy(m) for m in models]
    apart_opt = [make_optimizer(m, train_cfg) for m in apart]
    together_opt = [make_optimizer(m, train_cfg) for m in models]
    start = time.perf_counter()
    batches = [[stream.batch(step, b, n, seed) for seed in SEEDS] for step in range(steps + 1)]
    build_ms = 1000 * (time.perf_counter() - start) / ((steps + 1) * len(SEEDS))
    stacked = [(torch.stack([x for x, _ in step]), torch.stack([y for _, y in step])) for step in batches]

    def one_by_one(i):
        for m, opt, (x, y) in zip(apart, apart_opt, batches[i]):
            train_step(m, opt, x, y, grad_clip=train_cfg.grad_clip)

    def as_one(i):
        x, y = stacked[i]
        batched.batched_step(models, together_opt, x, y, grad_clip=train_cfg.grad_clip, kernel=kernel)

    ways = {"one by one": one_by_one, "batched": as_one}
    for way in ways.values():  # warm-up: first-call costs out of the timing
        way(0)
    rates = {name: [] for name in ways}
    for rep in range(reps):
        for name in (list(ways) if rep % 2 == 0 else list(ways)[::-1]):
            t0 = time.perf_counter()
            for i in range(1, steps + 1):
                ways[name](i)
            rates[name].append(len(SEEDS) * b * n * steps / (time.perf_counter() - t0))
    row = {"label": label, "preset": preset, "batch": b, "train_len": n, "d_model": model_cfg.d_model,
           "n_layers": model_cfg.n_layers, "layout": layout, "kernel": kernel, "steps": steps, "reps": reps,
           "bytes_per_s": {k: statistics.median(v) for k, v in rates.items()},
           "ratio": statistics.median(t / a for t, a in zip(rates["batched"], rates["one by one"])),
           "ratios": [round(t / a, 3) for t, a in zip(rates["batched"], rates["one by one"])],
           "batch_build_ms": build_ms}
    print(label, {k: round(v) for k, v in row["bytes_per_s"].items()}, "ratio", round(row["ratio"], 3), flush=True)
    return row


def render(rows: list[dict], facts: dict) -> str:
    header = ["case", "size (layers x width, batch x length)", "kernel", "one by one (bytes/s)", "batched (bytes/s)",
              "batched / one by one [per repetition]", "batch building (ms per seed-step)"]
    body = table(header, [
        [r["label"], f"{r['n_layers']} x {r['d_model']}, {r['batch']} x {r['train_len']}", r["kernel"],
         f"{r['bytes_per_s']['one by one']:,.0f}", f"{r['bytes_per_s']['batched']:,.0f}",
         f"{r['ratio']:.2f} [{min(r['ratios']):.2f}-{max(r['ratios']):.2f}]", f"{r['batch_build_ms']:.1f}"]
        for r in rows])
    return markdown([
        Heading("Three seeds batched against one by one (one thread)", 1),
        Text(f"`python benchmarks/batched.py` on {facts['cpu']}, torch {facts['torch']}, one thread, {facts['date']}: "
             f"seeds {', '.join(map(str, SEEDS))} of each case, {rows[0]['reps']} alternating repetitions of "
             f"{rows[0]['steps']} steps (lexkit.training.batched.batched_step against lexkit.training.loop.train_step "
             "per seed), the same weights and batches both ways."), body])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=6, help="steps per repetition")
    parser.add_argument("--cases", default=None, help="comma-separated case numbers (default: all)")
    parser.add_argument("--out", default=None, help="markdown report (JSON beside it)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    corpus = data.load_corpus("stdlib")
    stream = mix.MixedStream(data.tokens_of(corpus.train), RECIPE.mix)
    chosen = CASES if args.cases is None else [CASES[int(i)] for i in args.cases.split(",")]
    facts = cpu_facts(1)
    rows = [measure(*case, stream, args.reps, args.steps) for case in chosen]
    if args.out:
        write_report(args.out, render(rows, facts), {"machine": facts, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
