"""The training step at table G's size (the retrieval recipe: the `quick` preset, 2 layers of width 64,
batch 64 at 64 bytes, token shift 0.5) on ONE thread, as a study worker runs it: where the time goes
(matmul against the rest, the mix's batch building, the optimizer), bytes/s against this core's float32
matmul rate, and x-transformers at the same size side by side (alternating repetitions, ratios of
medians taken per repetition).

    python benchmarks/recipe_step.py --out docs/benchmarks-recipe.md
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from builders import lexkit_model, xt_model
from common import table
from lexkit.data import corpus as data
from lexkit.data import mix
from lexkit.documents.blocks import Heading, Text
from lexkit.documents.render import markdown
from lexkit.model.gpt import VOCAB
from lexkit.study.recipe import RECIPE
from lexkit.training.loop import make_optimizer, train_step
from training import matmul_gflops, train_flops_per_byte  # the benchmarks' one matmul rate and FLOPs count

LAYOUTS = {"rope (uniform)": None, "hwfa:W=16": "hwfa:W=16"}


#: the kinds a step's kernels are split into (a kernel's self time, by its aten name); the rest:
#: elementwise ops and copies (RoPE's rotations, token shift, residual adds, masks, zero fills)
KINDS = {"matmul": ("aten::mm", "aten::bmm", "aten::addmm"), "attention": ("scaled_dot_product",),
         "cross-entropy": ("log_softmax", "nll_loss"), "GELU": ("gelu",), "layer norm": ("layer_norm",),
         "optimizer": ("adam", "_foreach")}


def profile_step(step, batches) -> dict:
    """Self CPU time per step of the kernels by kind (:data:`KINDS`, else ``elementwise``), in ms,
    averaged over ``batches``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in batches:
            step(*batch)
    kinds = dict.fromkeys([*KINDS, "elementwise"], 0.0)
    for event in prof.key_averages():
        if not event.key.startswith("aten::"):
            continue
        ms = event.self_cpu_time_total / 1000 / len(batches)
        kind = next((k for k, names in KINDS.items() if any(n in event.key.lower() for n in names)), "elementwise")
        kinds[kind] += ms
    return kinds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--steps", type=int, default=8, help="steps per repetition")
    parser.add_argument("--out", default=None, help="markdown report (JSON beside it)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    corpus = data.load_corpus("stdlib")
    stream = mix.MixedStream(data.tokens_of(corpus.train), RECIPE.mix)
    rows = {}
    for label, layout in LAYOUTS.items():
        model, train_cfg = lexkit_model(RECIPE.preset, "rope", layout=layout, **RECIPE.settings())
        model_cfg = model.cfg
        n, b = model_cfg.train_len, RECIPE.batch
        start = time.perf_counter()
        batches = [stream.batch(s, b, n, 0) for s in range(args.steps + 2)]
        build = (time.perf_counter() - start) / len(batches)
        contenders = {"lexkit": model}
        if layout is None:
            torch.manual_seed(0)  # rotary on every layer, token shift 1 (half the features), tied
            contenders["x-transformers"] = xt_model(model_cfg, shift_tokens=1)
        steps = {}
        for name, net in contenders.items():
            opt = make_optimizer(net.train(), train_cfg)
            clip = train_cfg.grad_clip
            steps[name] = lambda x, y, net=net, opt=opt, clip=clip: train_step(net, opt, x, y, grad_clip=clip)
            for x, y in batches[:2]:
                steps[name](x, y)
        profile = {name: profile_step(step, batches[2:5]) for name, step in steps.items()}
        rates = {name: [] for name in steps}
        matmul = []
        for rep in range(args.reps):
            for name in (list(steps) if rep % 2 == 0 else list(steps)[::-1]):
                t0 = time.perf_counter()
                for x, y in batches[2:]:
                    steps[name](x, y)
                rates[name].append(b * n * args.steps / (time.perf_counter() - t0))
            matmul.append(matmul_gflops(512, 16))
        fpb = train_flops_per_byte(model_cfg.n_layers, model_cfg.d_model, VOCAB, model_cfg.train_len)["train"]
        gflops = statistics.median(matmul)
        step_ms = 1000 * b * n / statistics.median(rates["lexkit"])
        row = {"bytes_per_s": {k: statistics.median(v) for k, v in rates.items()},
               "batch_build_ms": 1000 * build, "step_ms": 1000 * b * n / statistics.median(rates["lexkit"]),
               "profile_ms": profile, "flops_per_byte": fpb, "matmul_gflops": gflops,
               "outside_kernels_ms": step_ms - sum(profile["lexkit"].values()),  # the profiler's own cost in it
               "matmul_share": statistics.median(rates["lexkit"]) * fpb / (gflops * 1e9)}
        if "x-transformers" in rates:
            row["ratio_lexkit_over_xt"] = statistics.median(a / c for a, c in zip(rates["lexkit"],
                                                                                  rates["x-transformers"]))
        rows[label] = row
        print(label, json.dumps(row, indent=1))
    if args.out:
        out = Path(args.out)
        meta = {"platform": platform.platform(), "torch": torch.__version__, "rows": rows}
        out.with_suffix(".json").write_text(json.dumps(meta, indent=1))
        out.write_text(render(rows))
    return 0


def render(rows: dict) -> str:
    header = ["model", "lexkit bytes/s", "x-transformers bytes/s", "lexkit / x-transformers", "step (ms)",
              f"of it, the kernels' own time: {' / '.join([*KINDS, 'elementwise'])} (ms, profiled)",
              "outside the kernels: Python, dispatch (ms)", "batch building (ms)",
              "% of the core's float32 matmul rate"]
    body = []
    for label, r in rows.items():
        p = r["profile_ms"]["lexkit"]
        xt = r["bytes_per_s"].get("x-transformers")
        body.append([label, f"{r['bytes_per_s']['lexkit']:,.0f}", "-" if xt is None else f"{xt:,.0f}",
                     f"{r.get('ratio_lexkit_over_xt', float('nan')):.2f}", f"{r['step_ms']:.1f}",
                     " / ".join(f"{v:.1f}" for v in p.values()), f"{r['outside_kernels_ms']:.1f}",
                     f"{r['batch_build_ms']:.1f}", f"{100 * r['matmul_share']:.0f} %"])
    return markdown([
        Heading("The training step at table G's size (one thread)", 1),
        Text(f"`python benchmarks/recipe_step.py` on {platform.machine()}, torch {torch.__version__}, one thread: "
             f"the retrieval recipe ({RECIPE.preset} preset, batch {RECIPE.batch}, token shift "
             f"{RECIPE.token_shift}, mix {RECIPE.mix})."),
        table(header, body)])


if __name__ == "__main__":
    raise SystemExit(main())
