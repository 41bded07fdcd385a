"""``lexkit sweep CONFIG.json --out DIR``: train and score the arms of a sweep (docs/hunt.md): each
arm a row of table G with its own training (a layout and its modifiers, ``lexkit train`` settings,
its steps), on several seeds, scored as table G scores (copy needles in the trained and held-out
formats, every multiple and depth, bpb at 1x and 16x) and on the tasks ``kvthread`` and
``ordinal``; then DIR/sweep.md (the table), DIR/sweep.json and DIR/sweep.png.

Cached and resumable like a study, its units shared out over ``--jobs`` worker processes at one
thread each; ``--report-only`` re-renders the table and figure from the cache without training.
"""

from __future__ import annotations

import argparse

from ..core import checks, threads
from ..core.device import resolve_device
from ..study.estimate import load_line
from ..study.execution import MAX_JOBS
from ..study.sweep import Sweep, load
from ..study.sweep.report import table
from ..study.workers import clock
from ..training import compiled
from .study import left, state
from .table import print_table


def add_parser(sub):
    p = sub.add_parser("sweep", help="train and score the arms of a sweep config, as table G does",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", metavar="CONFIG", help="the sweep's JSON file (docs/hunt.md)")
    p.add_argument("--out", required=True, help="the sweep's directory (its runs, cache and report)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="worker processes, one thread each on the CPU, one per GPU (default: the cores "
                   "lexkit.core.threads' "
                   "policy gives this command; 1 with --threads)")
    p.add_argument("--threads", type=int, metavar="N", help=threads.HELP + "; with --jobs, each worker's")
    p.add_argument("--device", default="auto")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help=compiled.HELP + "; given, it overrides the config's \"compile\"")
    p.add_argument("--report-only", action="store_true",
                   help="re-render sweep.md, sweep.json and sweep.png from the cache; train nothing")
    p.add_argument("--dry-run", action="store_true", help="list the units of work and estimate the time; train nothing")
    p.add_argument("--batch-seeds", action="store_true",
                   help="train each arm's seeds as one batched model (lexkit.training.batched; equal to seed by seed "
                   "within "
                   "float32 noise, slower on one CPU thread at table G's size: docs/benchmarks.md)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def run(args) -> int:
    resolve_device(args.device)
    checks.number("--jobs", args.jobs, maximum=MAX_JOBS)
    checks.number("--threads", args.threads, maximum=threads.MAX_THREADS)
    cfg = load(args.config)
    from .study import jobs

    sweep = Sweep(cfg, args.out, progress=not args.quiet, jobs=jobs(args), device=args.device, threads=args.threads,
                  batch_seeds=args.batch_seeds, compile=cfg.compile if args.compile is None else args.compile)
    if args.dry_run:
        print_sweep_estimate(sweep.estimate(), cfg)
        return 0
    results = sweep.report_only() if args.report_only else sweep.run()
    shown = table(results)
    print_table(shown, "ll" + "r" * (len(shown.header) - 2), title=f"\nsweep {cfg.name}")
    print(f"report: {args.out}/sweep.md, sweep.json, sweep.png")
    return 0


def print_sweep_estimate(estimate: dict, cfg) -> None:
    """The dry run: every unit (each run's training, its copy scoring, its scoring on each task) with
    its estimated time and what is left of it, then the wall time over the workers."""
    units = estimate["units"]
    trains = [u for u in units if u["job"] == "train"]
    print(f"sweep {cfg.name}: {len(cfg.arms)} arms x {cfg.seeds} seeds = {len(trains)} runs with --mix {cfg.mix} "
          f"({cfg.preset} preset, {cfg.steps} steps{', stopped by ' + cfg.stop if cfg.stop else ''}), "
          f"{len(units) - len(trains)} scorings")
    for u in units:
        label = u["label"] + (f", seed {u['seed']}" if "seed" in u and "seed" not in u["label"] else "")
        print(f"  {u['job']:9s} {label:48s} {state(u):9s} {left(u)}")
    jobs = estimate["jobs"]
    print(f"estimated total: {clock(estimate['total_s'])} of wall time on this machine with {jobs} "
          f"worker{'s' if jobs != 1 else ''} ({clock(estimate['task_s'])} of task time)"
          + (f"; {clock(estimate['left_s'])} left" if estimate["left_s"] < estimate["total_s"] else ""))
    said = load_line(estimate)
    if said:
        print(said)
