"""The compiled training step (lexkit.training.compiled: torch.compile of the forward, loss and backward; clipping
and fused AdamW eager) against the eager one, side by side in one run, on ``--threads`` threads (1: as a
study or sweep worker runs): at the presets tiny, quick and small and at table G's recipe, for a uniform
scheme (rope), a layout (HWFA) and one of the hunt's modifiers (A3: FoX's key/value shift on the global
layer). Per case: the first step of each way (the compiled one's includes tracing and inductor's C++
build, from an empty compile cache, and again with the cache warm, in a fresh process), then alternating
repetitions of steady steps on the same batches from the same weights; the ratio of bytes/s is the median
of the per-repetition ratios. Wall time of a run at the case's steps counts the first step:
``first + (steps - 1) x steady step``; break-even is the step count from which compiled is faster.

    python benchmarks/compile.py --threads 1 --out docs/benchmarks-compile.md

Each case runs in a child process of its own (``--one I``) with a fresh TORCHINDUCTOR_CACHE_DIR.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from builders import lexkit_model
from common import cpu_facts, table, write_report
from lexkit.documents.blocks import Heading, Text
from lexkit.documents.render import markdown
from lexkit.study.recipe import RECIPE
from lexkit.training.compiled import CompiledLoss
from lexkit.training.loop import make_optimizer, train_step_stats
from lexkit.training.settings import configs

KSHIFT = "none@causal+logn+shift+kshift"  # A3's global layer (benchmarks/sweeps/hunt-confirm.json)


def cases() -> list[tuple[str, str, str, str | None]]:
    """(label, size, kind, layout): every size with rope, HWFA and A3's layout."""
    out = []
    for size in ("tiny", "quick", "table G", "small"):
        layers = configs("small" if size == "small" else "tiny")[0].n_layers
        out += [(f"{size}: rope", size, "rope", None),
                (f"{size}: hwfa:W=16,shift=0.5", size, "hwfa", "hwfa:W=16,shift=0.5"),
                (f"{size}: A3 +kshift global", size, "A3",
                 f"(rope@window:16+shift)x{layers - 1};{KSHIFT}" if layers > 2 else f"rope@window:16+shift;{KSHIFT}")]
    return out


def build(size: str, layout: str | None):
    """The case's model (from seed 0) and training config: table G's recipe (its batch, lr and token shift
    on a uniform model; its steps), else the preset's own values (its steps)."""
    if size == "table G":
        shift = RECIPE.token_shift if layout is None else 0.0
        return lexkit_model(RECIPE.preset, "rope", batch=RECIPE.batch, lr=RECIPE.lr, steps=RECIPE.steps,
                            layout=layout, token_shift=shift)
    return lexkit_model(size, "rope", layout=layout)


def batches(count: int, batch: int, length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    out = []
    for _ in range(count):
        window = torch.randint(0, 256, (batch, length + 1), generator=gen)
        out.append((window[:, :-1], window[:, 1:]))
    return out


def one(index: int, reps: int, steps: int, first_only: bool) -> dict:
    """Case ``index`` in this process: see the module docstring."""
    label, size, kind, layout = cases()[index]
    eager, train_cfg = build(size, layout)
    eager, model_cfg = eager.train(), eager.cfg
    n, b = model_cfg.train_len, train_cfg.batch
    data = batches(steps + 1, b, n)
    compiled = copy.deepcopy(eager)
    opts = {"eager": make_optimizer(eager, train_cfg), "compiled": make_optimizer(compiled, train_cfg)}
    loss_fn = CompiledLoss(compiled, torch.device("cpu"), None)
    models = {"eager": eager, "compiled": compiled}
    loss_of = {"eager": None, "compiled": loss_fn}

    def step(way: str, i: int) -> float:
        x, y = data[i]
        return train_step_stats(models[way], opts[way], x, y, grad_clip=train_cfg.grad_clip, loss_of=loss_of[way])[0]

    first = {}
    losses: dict[str, list[float]] = {"eager": [], "compiled": []}
    for way in ("compiled",) if first_only else ("eager", "compiled"):
        t0 = time.perf_counter()
        losses[way].append(step(way, 0))
        first[way] = time.perf_counter() - t0
    row = {"label": label, "size": size, "kind": kind, "layout": layout, "n_layers": model_cfg.n_layers,
           "d_model": model_cfg.d_model, "batch": b, "train_len": n, "run_steps": train_cfg.steps,
           "first_step_s": first, "graphs_after_first": loss_fn.graphs, "kernels": loss_fn.kernels}
    if first_only:
        return row
    rates: dict[str, list[float]] = {"eager": [], "compiled": []}
    for rep in range(reps):
        for way in ("eager", "compiled") if rep % 2 == 0 else ("compiled", "eager"):
            t0 = time.perf_counter()
            for i in range(1, steps + 1):
                value = step(way, i)
                if rep == 0:
                    losses[way].append(value)
            rates[way].append(b * n * steps / (time.perf_counter() - t0))
    step_s = {way: b * n / statistics.median(r) for way, r in rates.items()}
    wall = {way: first[way] + (train_cfg.steps - 1) * step_s[way] for way in rates}
    gain = step_s["eager"] - step_s["compiled"]
    row.update({
        "graphs_after_all": loss_fn.graphs, "steps": steps, "reps": reps,
        "bytes_per_s": {way: statistics.median(r) for way, r in rates.items()},
        "ratio": statistics.median(c / e for c, e in zip(rates["compiled"], rates["eager"])),
        "ratios": [round(c / e, 3) for c, e in zip(rates["compiled"], rates["eager"])],
        "step_s": step_s, "wall_s": wall, "wall_ratio": wall["compiled"] / wall["eager"],
        "break_even_steps": (first["compiled"] - first["eager"]) / gain if gain > 0 else None,
        # the same batches from the same weights: the loss of each of the first steps + 1 both ways
        "max_loss_diff": max(abs(a - c) for a, c in zip(losses["eager"], losses["compiled"])),
    })
    return row


def child(index: int, args, cache: str, first_only: bool) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    cmd = [sys.executable, __file__, "--one", str(index), "--threads", str(args.threads), "--reps", str(args.reps),
           "--steps", str(args.steps)] + (["--first-only"] if first_only else [])
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"error: case {index} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def seconds(value: float) -> str:
    return f"{value:.1f}" if value < 10 else f"{value:,.0f}"


def render(rows: list[dict], facts: dict) -> str:
    header = ["case", "size (layers x width, batch x length)", "eager bytes/s", "compiled bytes/s",
              "compiled / eager, steady [per repetition]", "first step eager (s)",
              "first step compiled: cold cache / warm (s)", "run steps", "wall eager (s)", "wall compiled (s)",
              "wall compiled / eager", "the same, cache warm", "break-even (steps): cold / warm", "max loss gap"]
    body = []
    for r in rows:
        first, step = r["first_step_s"], r["step_s"]
        warm_wall = r["warm_first_step_s"] + (r["run_steps"] - 1) * step["compiled"]
        gain = step["eager"] - step["compiled"]
        even = "never" if gain <= 0 else (f"{(first['compiled'] - first['eager']) / gain:,.0f} / "
                                          f"{(r['warm_first_step_s'] - first['eager']) / gain:,.0f}")
        body.append([r["label"], f"{r['n_layers']} x {r['d_model']}, {r['batch']} x {r['train_len']}",
                     f"{r['bytes_per_s']['eager']:,.0f}", f"{r['bytes_per_s']['compiled']:,.0f}",
                     f"{r['ratio']:.2f} [{min(r['ratios']):.2f}-{max(r['ratios']):.2f}]", f"{first['eager']:.2f}",
                     f"{first['compiled']:.1f} / {r['warm_first_step_s']:.1f}", f"{r['run_steps']:,}",
                     seconds(r['wall_s']['eager']), seconds(r['wall_s']['compiled']), f"{r['wall_ratio']:.2f}",
                     f"{warm_wall / r['wall_s']['eager']:.2f}", even,
                     f"{r['max_loss_diff']:.1e}"])
    return markdown([
        Heading("The compiled training step against the eager one", 1),
        Text(f"`python benchmarks/compile.py --threads {facts['threads']}` on {facts['cpu']} ({facts['cores']} "
             f"cores), torch {facts['torch']}, {facts['threads']} thread(s), {facts['date']}, load average at the "
             f"start {facts['load_average_start']}, at the end {facts['load_average_end']}: per case {rows[0]['reps']} "
             f"alternating repetitions of {rows[0]['steps']} steps each way on the same random batches from the same "
             "weights (lexkit.training.loop.train_step_stats, eager or with lexkit.training.compiled.CompiledLoss: "
             "forward, loss and backward compiled by inductor, clipping and fused AdamW eager). The first step of "
             "each way is timed "
             "apart: the compiled one from an empty compile cache in a fresh process (cold), and in a second fresh "
             "process with that cache (warm, as a second run or study worker finds it). Wall time of a run of the "
             "case's steps (the preset's; table G's recipe: its 4,000) = first step + (steps - 1) x the median steady "
             "step (with the warm first step: the same, cache warm); break-even: the steps from which the compiled "
             "run is the shorter (cold cache / warm). Max loss gap: the largest "
             f"|eager - compiled| loss over the first {rows[0]['steps'] + 1} steps."),
        table(header, body)])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each case's process (default 1)")
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--steps", type=int, default=12, help="steady steps per repetition")
    parser.add_argument("--cases", default=None, help="comma-separated case numbers (default: all)")
    parser.add_argument("--out", default=None, help="markdown report (JSON beside it)")
    parser.add_argument("--render", metavar="JSON", default=None,
                        help="write --out from the JSON of an earlier run (no measurement)")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--first-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.one is not None:
        print(json.dumps(one(args.one, args.reps, args.steps, args.first_only)))
        return 0
    if args.render is not None:
        data = json.loads(Path(args.render).read_text())
        write_report(args.out, render(data["rows"], data["machine"]), data)
        return 0
    chosen = range(len(cases())) if args.cases is None else [int(i) for i in args.cases.split(",")]
    facts = cpu_facts(args.threads)
    rows = []
    for index in chosen:
        with tempfile.TemporaryDirectory(prefix="lexkit-compile-") as cache:
            row = child(index, args, cache, first_only=False)
            row["warm_first_step_s"] = child(index, args, cache, first_only=True)["first_step_s"]["compiled"]
        rows.append(row)
        print(f"{row['label']}: eager {row['bytes_per_s']['eager']:,.0f} B/s, compiled "
              f"{row['bytes_per_s']['compiled']:,.0f} B/s, ratio {row['ratio']:.2f}, first step "
              f"{row['first_step_s']['compiled']:.1f} s (warm {row['warm_first_step_s']:.1f} s), wall ratio "
              f"{row['wall_ratio']:.2f}", flush=True)
    facts["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.out:
        write_report(args.out, render(rows, facts), {"machine": facts, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
