"""A compiled evaluation against the eager one, side by side in one process per case, on ``--threads``
threads (1: as a study worker runs): the forward the study's evaluation calls (``model(x, pattern=...)``
under ``torch.inference_mode``; :func:`lexkit.instruments.evaluate.measure.evaluate`) at the study's
lengths and one batch shape per length (as many windows as fit 8,192 inputs, the CPU default), for the
small preset with rope, HWFA and A3's layout (``benchmarks/compile.py``'s cases), under each of the
study's patterns. Per shape: the compiled first call (tracing and inductor's C++ build, from an empty
compile cache: every shape is a graph of its own, ``dynamic=False``) and the median of ``--reps``
steady calls each way, alternating. Break-even: the calls of one shape from which the compiled
evaluation is the shorter; the study's evaluation makes ``docs x max(lengths) / 8,192`` calls of each
shape (6 at its defaults), once per cell and pattern.

    python benchmarks/compile_eval.py --threads 1 --out docs/benchmarks-compile-eval.md

Each case runs in a child process of its own (``--one I``) with a fresh TORCHINDUCTOR_CACHE_DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from builders import lexkit_model
from common import cpu_facts, table, write_report
from lexkit.documents.blocks import Heading, Text
from lexkit.documents.render import markdown
from lexkit.study.plan import DEFAULT_PATTERNS

BATCH_TOKENS = 8192  # the evaluation's inputs per batch on the CPU (evaluate's batch_tokens default)
STUDY_CALLS = 24 * 2048 // BATCH_TOKENS  # calls of each shape in the study's evaluation: 24 documents of 2,048 bytes
CASES = [("rope", None), ("HWFA", "hwfa:W=16,shift=0.5"),
         ("A3", "(rope@window:16+shift)x3;none@causal+logn+shift+kshift")]


def study_pattern(spec: str, train_len: int) -> str:
    """The study's pattern as it evaluates it: a local one's W is the training length."""
    return spec if spec == "causal" else f"{spec}:{train_len}"


def one(index: int, reps: int, lengths: list[int]) -> dict:
    """Case ``index`` in this process (module docstring)."""
    label, layout = CASES[index]
    model, _ = lexkit_model("small", "rope", layout=layout)
    model = model.eval()
    # every (pattern, shape) is a graph of its own: raise dynamo's limit of 8 per frame, past which it
    # runs the rest eagerly with only a logged warning (the first run of this benchmark fell back there)
    torch._dynamo.config.recompile_limit = torch._dynamo.config.accumulated_recompile_limit = 256
    compiled = torch.compile(model, dynamic=False)
    rows = []
    gen = torch.Generator().manual_seed(0)
    for spec in DEFAULT_PATTERNS:
        pattern = study_pattern(spec, model.cfg.train_len)
        for n in lengths:
            x = torch.randint(0, 256, (max(1, BATCH_TOKENS // n), n), generator=gen)
            with torch.inference_mode():
                t0 = time.perf_counter()
                want = model(x, pattern=pattern)
                eager_first = time.perf_counter() - t0
                t0 = time.perf_counter()
                got = compiled(x, pattern=pattern)
                first = time.perf_counter() - t0
                times: dict[str, list[float]] = {"eager": [], "compiled": []}
                for rep in range(reps):
                    for way, fn in (("eager", model), ("compiled", compiled))[:: 1 if rep % 2 == 0 else -1]:
                        t0 = time.perf_counter()
                        fn(x, pattern=pattern)
                        times[way].append(time.perf_counter() - t0)
            steady = {way: statistics.median(t) for way, t in times.items()}
            gain = steady["eager"] - steady["compiled"]
            rows.append({"pattern": pattern, "length": n, "batch": x.shape[0], "eager_first_s": eager_first,
                         "compiled_first_s": first, "steady_s": steady, "ratio": steady["eager"] / steady["compiled"],
                         "break_even_calls": (first - eager_first) / gain + 1 if gain > 0 else None,
                         "max_logit_diff": float((want - got).abs().max())})
            print(f"{label} {pattern} {n}: eager {steady['eager']:.3f} s, compiled {steady['compiled']:.3f} s, "
                  f"first {first:.1f} s", file=sys.stderr, flush=True)
    return {"label": label, "layout": layout, "rows": rows}


def render(cases: list[dict], facts: dict, reps: int) -> str:
    header = ["case", "pattern", "length x batch", "eager call (s)", "compiled call (s)", "eager / compiled",
              "compiled first call (s)", "break-even (calls)", f"the study's {STUDY_CALLS} calls: compiled / eager",
              "max |logit gap|"]
    body = []
    for case in cases:
        for r in case["rows"]:
            eager = r["eager_first_s"] + (STUDY_CALLS - 1) * r["steady_s"]["eager"]
            comp = r["compiled_first_s"] + (STUDY_CALLS - 1) * r["steady_s"]["compiled"]
            even = "never" if r["break_even_calls"] is None else f"{r['break_even_calls']:,.0f}"
            body.append([case["label"], r["pattern"], f"{r['length']:,} x {r['batch']}",
                         f"{r['steady_s']['eager']:.3f}", f"{r['steady_s']['compiled']:.3f}", f"{r['ratio']:.2f}",
                         f"{r['compiled_first_s']:.1f}", even, f"{comp / eager:.1f}", f"{r['max_logit_diff']:.1e}"])
    return markdown([
        Heading("A compiled evaluation against the eager one", 1),
        Text(f"`python benchmarks/compile_eval.py --threads {facts['threads']}` on {facts['cpu']} ({facts['cores']} "
             f"cores), torch {facts['torch']}, {facts['threads']} thread(s), {facts['date']}, load average at the "
             f"start {facts['load_average_start']}, at the end {facts['load_average_end']}: the small preset's "
             "model (untrained, seed 0) under `torch.compile(dynamic=False)` against eager, one batch shape per "
             f"length ({BATCH_TOKENS:,} inputs a batch), {reps} alternating steady calls each way under "
             "`torch.inference_mode`; the compiled first call from an empty compile cache (a shape is a graph). "
             f"The study evaluates each shape in {STUDY_CALLS} calls per cell and pattern (24 documents of 2,048 "
             "bytes): the last column is the wall time of those calls compiled over eager, first calls included."),
        table(header, body)])


def child(index: int, args, cache: str) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    cmd = [sys.executable, __file__, "--one", str(index), "--threads", str(args.threads), "--reps", str(args.reps),
           "--lengths", args.lengths]
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"error: case {index} failed (exit {done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each case's process (default 1)")
    parser.add_argument("--reps", type=int, default=3, help="steady calls each way per shape")
    parser.add_argument("--lengths", default="64,128,256,512,1024,2048", help="the study's lengths")
    parser.add_argument("--cases", default=None, help="comma-separated case numbers (default: all)")
    parser.add_argument("--out", default=None, help="markdown report (JSON beside it)")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    lengths = [int(n) for n in args.lengths.split(",")]
    if args.one is not None:
        print(json.dumps(one(args.one, args.reps, lengths)))
        return 0
    chosen = range(len(CASES)) if args.cases is None else [int(i) for i in args.cases.split(",")]
    facts = cpu_facts(args.threads)
    cases = []
    for index in chosen:
        with tempfile.TemporaryDirectory(prefix="lexkit-compile-eval-") as cache:
            cases.append(child(index, args, cache))
    facts["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.out:
        write_report(args.out, render(cases, facts, args.reps), {"machine": facts, "cases": cases})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
