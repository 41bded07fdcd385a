"""``lexkit study``: train each scheme at a short length, evaluate it at many lengths and
patterns, measure resolution and the design principles, and write DIR/report.md and
DIR/report.html (one self-contained page: figures embedded, best value per column marked).

Cached and resumable: a re-run skips finished work, an interrupted one resumes, and a new
--scheme trains only that scheme. Under ``torchrun --nproc_per_node N`` the cells are shared out
over the N processes (nodes sharing --out too); rank 0 writes the report (docs/distributed.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import positions
from ..attention import pattern_help
from ..core import checks, options, threads
from ..core.device import resolve_device
from ..core.errors import LexkitError
from ..core.specs import parse_lengths
from ..study import DEFAULT_LAYOUTS, DEFAULT_PATTERNS, DEFAULT_SCHEMES, TABLES, Study, StudyConfig, read
from ..study.estimate import load_line
from ..study.execution import MAX_JOBS
from ..study.plan import setting_name
from ..study.report import length_table, pattern_table
from ..study.report.tables import computed
from ..study.schema import StudyResults
from ..study.tables.retrieval.findings import context_goal_finding
from ..study.tables.retrieval.report import retrieval_table
from ..study.units import GRID
from ..study.workers import clock
from ..training import compiled, presets
from ..training.distributed import world as study_world
from .table import print_table


def add_parser(sub):
    p = sub.add_parser("study", help="run the whole comparison and write a report", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="small", choices=list(presets.PRESETS), help="size preset (default: small)")
    p.add_argument("--scheme", action="append", metavar="SPEC",
                   help=f"repeatable; default: {' '.join(DEFAULT_SCHEMES)} (with --layout only: none)")
    p.add_argument("--since-seeds", action="store_true",
                   help=f"also study the schemes since the seeds: {' '.join(positions.SINCE_SEEDS)} (tables A-D and G; "
                   "docs/schemes.md has their cost)")
    p.add_argument("--layout", action="append", metavar="SPEC",
                   help="a layout as a row beside the schemes, in tables A-D and G (docs/layouts.md), "
                   "e.g. hwfa:W=32,shift=0.5; "
                   f"repeatable; default: {' '.join(DEFAULT_LAYOUTS) or 'none'} (with --scheme only: none)")
    p.add_argument("--pattern", action="append", metavar="SPEC",
                   help=pattern_help(default=" ".join(DEFAULT_PATTERNS), repeatable=True))
    p.add_argument("--lengths", help="comma list (default: the training length x 1/2, 1, 2, 4, 8, 16)")
    p.add_argument("--seeds", type=int, default=1, help="seeds per scheme (mean ± std in every cell)")
    p.add_argument("--steps", type=int, help=f"training steps (default: the preset's, "
                   f"{presets.PRESETS['small']['steps']} in small; see `lexkit presets`)")
    p.add_argument("--data", default="stdlib", help="training corpus (default: stdlib)")
    p.add_argument("--eval-docs", type=int, default=24, help="validation documents scored per length")
    p.add_argument("--out", default="study", help="study directory (default: ./study)")
    p.add_argument("--device", default="auto")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None, help=compiled.HELP)
    p.add_argument("--threads", type=int, metavar="N", help=threads.HELP + "; with --jobs, each worker's "
                   "(default 1); without --jobs, one process at N threads")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="worker processes that train and score the study's units of work side by side, each at "
                   "one thread on the CPU, one per device on GPUs (default: the cores lexkit.core.threads' policy "
                   "gives this command, i.e. the free ones; the GPUs; 1 with --threads: one process); "
                   "results equal one process's at one thread")
    for table in TABLES:  # each table's settings, from its own dataclass: --no-KEY, --KEY-FIELD
        add_table_flags(p, table.key, table.Settings)
    p.add_argument("--tensorboard", nargs="?", const="", metavar="DIR",
                   help="also write the evaluations (bpb by length per scheme and pattern) and the runs' "
                   "training curves as TensorBoard event files (default DIR: OUT/tensorboard; needs lexkit[tb])")
    p.add_argument("--dry-run", action="store_true", help="list the cells and estimate the time; train nothing")
    p.add_argument("--readme", metavar="FILE",
                   help="rewrite the study summary block of FILE (the README's) from OUT/results.json, as the "
                   "report computes it; train nothing")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def add_table_flags(p, key: str, settings: type) -> None:
    """``--no-KEY`` and ``--KEY-FIELD`` for each field of a table's settings (:func:`lexkit.core.options.add_flags`),
    each stored as StudyConfig's keyword of that setting."""
    options.add_flags(p, settings, flag=lambda field: setting_name(key, field, flag=True),
                      dest=lambda field: setting_name(key, field))


def table_settings(args) -> dict:
    """Every table's settings as given on the command line, checked under their flags' names."""
    out = {}
    for table in TABLES:
        named = options.given(args, table.Settings, dest=lambda field, key=table.key: setting_name(key, field))
        settings = table.Settings(**named)
        settings.check(table.key, flags=True)
        out[table.key] = settings
    return out


def jobs(args) -> int:
    """``--jobs``, else 1 with ``--threads`` (one process at those threads), else the GPUs on a CUDA
    device, else the threads lexkit.core.threads' policy gave this command (the free cores, or
    ``LEXKIT_THREADS``), a worker at one thread each."""
    if args.jobs is not None:
        return args.jobs
    if args.threads is not None:
        return 1
    import torch

    if str(resolve_device(args.device)).startswith("cuda"):
        return max(1, torch.cuda.device_count())
    return max(1, torch.get_num_threads())


def run(args) -> int:
    if args.readme is not None:
        return write_readme(Path(args.out), Path(args.readme))
    resolve_device(args.device)  # before any timing or training: a missing CUDA fails at once
    for flag, value, top in (("--seeds", args.seeds, 1000), ("--steps", args.steps, checks.MAX_COUNT),
                             ("--eval-docs", args.eval_docs, checks.MAX_COUNT),
                             ("--threads", args.threads, threads.MAX_THREADS), ("--jobs", args.jobs, MAX_JOBS)):
        checks.number(flag, value, maximum=top)
    tables = table_settings(args)
    # one parse of --lengths, each at most what lexkit eval takes (EvalOptions' lengths)
    lengths = checks.lengths("--lengths", parse_lengths(args.lengths), checks.MAX_EVAL_LENGTH) if args.lengths else None
    if args.tensorboard is not None:
        from ..training.tensorboard import require

        require()  # before hours of work: a missing extra fails at once
    cfg = StudyConfig(
        preset=args.preset,
        schemes=(args.scheme or ([] if args.layout else list(DEFAULT_SCHEMES)))
        + (positions.SINCE_SEEDS if args.since_seeds else []),
        layouts=args.layout or ([] if args.scheme else list(DEFAULT_LAYOUTS)),
        patterns=args.pattern or list(DEFAULT_PATTERNS),
        lengths=lengths,
        seeds=args.seeds, steps=args.steps, data=args.data, eval_docs=args.eval_docs,
        device=args.device, threads=args.threads, compile=args.compile, tables=tables,
    )
    study = Study(cfg, args.out, progress=not args.quiet, jobs=1 if study_world().parallel else jobs(args))
    if not study.world.is_main and args.dry_run:
        return 0  # rank 0 prints the estimate
    if args.dry_run:
        print_estimate(study.estimate(), cfg)
        return 0
    results = study.run()
    if not study.world.is_main:
        return 0  # rank 0 prints the tables
    results = read(results)
    print_tables(results)
    if args.tensorboard is not None:
        from ..study.tensorboard import write_study
        from ..training.tensorboard import export_runs

        logdir = Path(args.tensorboard or Path(args.out) / "tensorboard")
        evals = write_study(results, logdir)
        trained = export_runs(Path(args.out) / "runs", logdir / "runs")
        print(f"tensorboard: the evaluations of {len(evals)} configurations and the training curves of "
              f"{len(trained)} runs in {logdir} "
              f"(view: tensorboard --logdir {logdir})")
    print(f"report: {args.out}/report.md, report.html  (results.json, results.csv, plots); "
          f"{results.work['ran']} tasks ran, {results.work['cached']} cached, {results.wall_seconds:.0f} s"
          + computed(results))
    return 0


def write_readme(out: Path, readme: Path) -> int:
    """``--readme``: the summary block of ``readme`` written from ``out``'s results.json."""
    from ..study.summary import write_into

    if not (out / "results.json").is_file():
        raise LexkitError(f"--readme needs a finished study: {out / 'results.json'} does not exist (run lexkit "
                          f"study --out {out} first)")
    if not readme.is_file():
        raise LexkitError(f"--readme {readme}: no such file")
    write_into(readme, read(out / "results.json"))
    print(f"{readme}: the study summary written from {out / 'results.json'}")
    return 0


def print_estimate(estimate: dict, cfg: StudyConfig) -> None:
    """The dry run: every training run of the grid, then each table's units, each with its estimated
    time and what is left of it, then the wall time over the workers."""
    units, jobs = estimate["units"], estimate["jobs"]
    cells = [u for u in units if u["table"] == GRID]
    docs = estimate.get("eval_docs")
    scored = "" if docs is None else f"; bpb on {docs} document{'' if docs == 1 else 's'} per length" + (
        f" (--eval-docs {cfg.eval_docs}: only {docs} are long enough for {max(estimate['lengths'])} bytes)"
        if docs < cfg.eval_docs else "")
    print(f"{len(cells)} training runs; lengths {estimate['lengths']}; patterns {estimate['patterns']}{scored}")
    for u in cells:
        print(f"  {u['run']:48s} {state(u):17s} train ~{u['train_s']:.0f} s, eval ~{u['eval_s']:.0f} s")
    for key in dict.fromkeys(u["table"] for u in units if u["table"] != GRID):
        mine = [u for u in units if u["table"] == key]
        ESTIMATES.get(key, print_table_estimate)(mine, cfg, key)
    for table in TABLES:  # a table that is off, or has no work in this study
        if table.key not in {u["table"] for u in units}:
            ESTIMATES.get(table.key, print_table_estimate)([], cfg, table.key)
    workers = f"{jobs} worker{'s' if jobs != 1 else ''}"
    print(f"estimated total: {estimate['total_s'] / 60:.1f} min of wall time on this machine with {workers} (measured "
          f"just now; {estimate['task_s'] / 60:.1f} min of task time, its longest chain "
          f"{estimate['critical_s'] / 60:.1f} min)"
          + (f"; at most {estimate['left_s'] / 60:.1f} min left: what is already trained and cached here is reused"
             if estimate["left_s"] < estimate["total_s"] else "")
          + (f"; {estimate['least_s'] / 60:.1f} min if every run with a stop rule stops at its earliest"
             if estimate["least_s"] < estimate["left_s"] else ""))
    said = load_line(estimate)
    if said:
        print(said)


def state(unit: dict) -> str:
    """What the study directory holds of a unit: ``exists`` (done), ``to train`` / ``to run`` (none
    of it), or how much of a training run is left."""
    if unit["left"] <= 0:
        return "exists"
    if 0 < unit.get("done_steps", 0) < unit.get("steps", 0):
        return f"{unit['done_steps']}/{unit['steps']} steps"
    return "to train" if unit["job"] in ("cell", "train") else "to run"


def left(unit: dict) -> str:
    """The unit's estimated seconds, and what is left of them when that is less."""
    text = f"~{clock(unit['seconds'])}"
    return text + (f" ({clock(unit['left'])} left)" if 0 < unit["left"] < unit["seconds"] - 0.5 else "")


def print_table_estimate(units: list[dict], cfg: StudyConfig, key: str) -> None:
    """A table's part of ``--dry-run``: its tasks, each with its time (or that it is skipped)."""
    tasks = [task for u in units for task in (u.get("tasks", []) if u["job"] == "table" else [u])]
    if not tasks:
        print(f"table {key}: skipped")
        return
    print(f"table {key}: {len(tasks)} tasks, ~{sum(task['seconds'] for task in tasks):.0f} s")
    for task in tasks:
        print(f"  {task['job']:9s} {task['label']:40s} ~{task['seconds']:.0f} s")


def print_extension_estimate(extension: list[dict], cfg: StudyConfig, key: str = "extension") -> None:
    """Table E's part of ``--dry-run``: its evaluations and fine-tunes."""
    if extension:
        tunes = [task for task in extension if task["job"] == "fine-tune"]
        tuned = (f"{len(tunes)} fine-tunes of {tunes[0]['steps']} steps at 4x the training length" if tunes else
                 "no fine-tunes (--extension-steps 0)")
        print(f"table E (context extension of rope): {len(extension) - len(tunes)} evaluations without "
              f"fine-tuning, {tuned}, ~{sum(task['seconds'] for task in extension):.0f} s")
        for task in extension:
            print(f"  E {task['job']:9s} {task['label']:40s} seed {task['seed']}  {state(task):9s} {left(task)}")
    else:
        print("table E (context extension): skipped (--no-extension, or rope is not a studied scheme)")


def print_tables(results: StudyResults) -> None:
    """Tables A, B and (when the study has it) G in the terminal, then the goal of G."""
    for title, table in (("bits per byte, causal (A)", length_table(results)),
                         ("beyond the training length, by pattern (B)", pattern_table(results))):
        align = "".join("l" if h in ("scheme", "pattern") else "r" for h in table.header)
        print_table(table, align, title=f"\n{title}")
    if results.table("retrieval"):
        table = retrieval_table(results)
        print_table(table, "ll" + "r" * (len(table.header) - 2), title="\nuse of context: exact match of copy "
                    "needles (%) and bpb, by multiple of the training length (G)")
        print(context_goal_finding(results).replace("**", ""))


def print_retrieval_estimate(tasks: list[dict], cfg: StudyConfig, key: str = "retrieval") -> None:
    """Table G's part of ``--dry-run``: its runs (trained or to train) and configurations, and the
    recipe they train with (the study preset's, unless asked otherwise)."""
    if not tasks:
        print("table G (use of context): skipped (--no-retrieval, or none of its schemes is studied)")
        return
    trains = [task for task in tasks if task["job"] == "train"]
    runs = f"{len(trains)} run{'s' if len(trains) != 1 else ''}"
    g = cfg.tables[key]
    recipe = g.recipe(cfg.preset)
    stop = f", stopped by {recipe.stop}" if recipe.stop else ""
    print(f"table G (use of context): {runs} ({g.seeds} seed{'s' if g.seeds != 1 else ''} "
          f"a row) with --mix {recipe.mix} ({recipe.preset} preset, {recipe.steps} steps{stop}, batch "
          f"{recipe.batch}), {len(tasks) - len(trains)} configurations scored at 1-16x in trained and held-out "
          f"formats, ~{sum(task['seconds'] for task in tasks):.0f} s")
    for task in tasks:
        print(f"  G {task['job']:9s} {task['label']:40s} {state(task):9s} {left(task)}")


#: how ``--dry-run`` prints each table's tasks (any other table: :func:`print_table_estimate`)
ESTIMATES = {"extension": print_extension_estimate, "retrieval": print_retrieval_estimate}
