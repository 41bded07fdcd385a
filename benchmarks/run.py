#!/usr/bin/env python
"""lexkit against x-transformers on this CPU, side by side in one run: training speed, long
evaluation, targets. How it measures: benchmarks/README.md.

    python benchmarks/run.py [--quick] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time

import torch

from builders import lexkit_model
from common import ROOT, cpu_facts, load_average, write_report
from contenders import FULL, QUICK, SIZE
from long_eval import bench_eval, summarize_eval
from render import render, targets
from training import bench_training, linear_weights, summarize_training, train_flops_per_byte

THREADS = 2  # the default: a 2-core machine


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
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    settings = QUICK if args.quick else FULL
    began = time.perf_counter()
    result = {"quick": args.quick, "settings": dataclasses.asdict(settings), "machine": cpu_facts(args.threads),
              "mem_guard_gb": args.mem_guard_gb}
    raw = bench_training(settings, log)
    result["training_raw"] = raw
    result["training"] = summarize_training(raw)
    result["matmul_gflops"] = statistics.median(raw["matmul_gflops"])
    result["flops_per_byte"] = train_flops_per_byte()
    result["lexkit_linear_weights"] = linear_weights(lexkit_model(SIZE, "alibi")[0])
    rows = [] if args.skip_eval else bench_eval(settings, args.threads, args.mem_guard_gb, args.timeout, log)
    result["eval_raw"], result["eval"] = rows, summarize_eval(rows)
    result["targets"] = targets(result["training"], result["eval"], settings)
    result["machine"]["load_average_end"] = load_average()
    result["elapsed_s"] = time.perf_counter() - began
    for t in result["targets"]:
        log(f"{'PASS' if t['pass'] else 'MISS'}  {t['target']}: {t['measured']}")
    json_path = write_report(args.out, render(result), result)
    log(f"wrote {args.out} and {json_path} ({result['elapsed_s'] / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
