"""``lexkit study``: train each scheme at a short length, evaluate it at many lengths and
patterns, measure resolution and the design principles, and write DIR/report.md and
DIR/report.html (one self-contained page: figures embedded, best value per column marked).

Cached and resumable: a re-run skips finished work, an interrupted one resumes, and a new
--scheme trains only that scheme. Under ``torchrun --nproc_per_node N`` the cells are shared out
over the N processes (nodes sharing --out too); rank 0 writes the report (docs/distributed.md).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from .. import checks, positions, presets, threads
from ..device import resolve_device
from ..errors import LexkitError
from ..report import length_table, pattern_table
from ..rows import StudyResults
from ..specs import parse_lengths
from ..study import DEFAULT_LAYOUTS, DEFAULT_PATTERNS, DEFAULT_SCHEMES, TABLES, Study, StudyConfig, read
from ..study.plan import setting_name
from ..study.recipe import RECIPE
from ..study.tables.retrieval.findings import context_goal_finding
from ..study.tables.retrieval.report import retrieval_table
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
                   help=f"repeatable; default: {' '.join(DEFAULT_PATTERNS)}")
    p.add_argument("--lengths", help="comma list (default: the training length x 1/2, 1, 2, 4, 8, 16)")
    p.add_argument("--seeds", type=int, default=1, help="seeds per scheme (mean ± std in every cell)")
    p.add_argument("--steps", type=int, help=f"training steps (default: the preset's, "
                   f"{presets.PRESETS['small']['steps']} in small; see `lexkit presets`)")
    p.add_argument("--data", default="stdlib", help="training corpus (default: stdlib)")
    p.add_argument("--eval-docs", type=int, default=24, help="validation documents scored per length")
    p.add_argument("--out", default="study", help="study directory (default: ./study)")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, metavar="N", help=threads.HELP)
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
    """``--no-KEY`` and ``--KEY-FIELD`` for each field of a table's settings (its ``help`` metadata,
    the type and ``choices`` of its default), each stored as StudyConfig's keyword of that setting."""
    for field in dataclasses.fields(settings):
        flag, dest, meta = setting_name(key, field.name, flag=True), setting_name(key, field.name), field.metadata
        if field.name == "on":
            p.add_argument(flag, dest=dest, action="store_false", help=meta.get("help"))
        else:
            p.add_argument(flag, dest=dest, type=type(field.default), default=field.default,
                           choices=meta.get("choices"), help=meta.get("help"))


def table_settings(args) -> dict:
    """Every table's settings as given on the command line, checked under their flags' names."""
    out = {}
    for table in TABLES:
        settings = table.Settings(**{f.name: getattr(args, setting_name(table.key, f.name))
                                     for f in dataclasses.fields(table.Settings)})
        settings.check(table.key, flags=True)
        out[table.key] = settings
    return out


def run(args) -> int:
    if args.readme is not None:
        return write_readme(Path(args.out), Path(args.readme))
    resolve_device(args.device)  # before any timing or training: a missing CUDA fails at once
    for flag, value, top in (("--seeds", args.seeds, 1000), ("--steps", args.steps, checks.MAX_COUNT),
                             ("--eval-docs", args.eval_docs, checks.MAX_COUNT), ("--threads", args.threads, 4096)):
        checks.number(flag, value, maximum=top)
    tables = table_settings(args)
    if args.lengths:
        checks.lengths("--lengths", parse_lengths(args.lengths), checks.MAX_EVAL_LENGTH)
    if args.tensorboard is not None:
        from ..tensorboard import require

        require()  # before hours of work: a missing extra fails at once
    cfg = StudyConfig(
        preset=args.preset,
        schemes=(args.scheme or ([] if args.layout else list(DEFAULT_SCHEMES)))
        + (positions.SINCE_SEEDS if args.since_seeds else []),
        layouts=args.layout or ([] if args.scheme else list(DEFAULT_LAYOUTS)),
        patterns=args.pattern or list(DEFAULT_PATTERNS),
        lengths=parse_lengths(args.lengths) if args.lengths else None,
        seeds=args.seeds, steps=args.steps, data=args.data, eval_docs=args.eval_docs,
        device=args.device, threads=args.threads, tables=tables,
    )
    study = Study(cfg, args.out, progress=not args.quiet)
    if not study.world.is_main and args.dry_run:
        return 0  # rank 0 prints the plan
    if args.dry_run:
        print_plan(study.estimate(), cfg)
        return 0
    results = study.run()
    if not study.world.is_main:
        return 0  # rank 0 prints the tables
    results = read(results)
    print_tables(results)
    if args.tensorboard is not None:
        from ..tensorboard import export_runs, write_study

        logdir = Path(args.tensorboard or Path(args.out) / "tensorboard")
        evals = write_study(results, logdir)
        trained = export_runs(Path(args.out) / "runs", logdir / "runs")
        print(f"tensorboard: the evaluations of {len(evals)} configurations and the training curves of "
              f"{len(trained)} runs in {logdir} "
              f"(view: tensorboard --logdir {logdir})")
    print(f"report: {args.out}/report.md, report.html  (results.json, results.csv, plots); "
          f"{results.work['ran']} tasks ran, {results.work['cached']} cached, {results.wall_seconds:.0f} s")
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


def print_plan(plan: dict, cfg: StudyConfig) -> None:
    """The dry run: every training run, then each table's tasks, each with its estimated time."""
    print(f"{len(plan['cells'])} training runs; lengths {plan['lengths']}; patterns {plan['patterns']}")
    for cell in plan["cells"]:
        est = plan["grid"][cell["label"]]
        state = "exists" if cell["exists"] else "to train"
        print(f"  {cell['run']:48s} {state:9s} train ~{est['train_s']:.0f} s, eval ~{est['eval_s']:.0f} s")
    for key, tasks in plan["tables"].items():
        PLANS.get(key, print_table_plan)(tasks, cfg, key)
    print(f"estimated total: {plan['total_s'] / 60:.1f} min on this machine (measured just now)"
          + (f"; at most {plan['left_s'] / 60:.1f} min left: the runs already trained here are reused"
             if plan["left_s"] < plan["total_s"] else ""))


def print_table_plan(tasks: list[dict], cfg: StudyConfig, key: str) -> None:
    """A table's part of ``--dry-run``: its tasks, each with its time (or that it is skipped)."""
    if not tasks:
        print(f"table {key}: skipped")
        return
    print(f"table {key}: {len(tasks)} tasks, ~{sum(task['seconds'] for task in tasks):.0f} s")
    for task in tasks:
        print(f"  {task['kind']:9s} {task['label']:40s} ~{task['seconds']:.0f} s")


def print_extension_plan(extension: list[dict], cfg: StudyConfig, key: str = "extension") -> None:
    """Table E's part of ``--dry-run``: its evaluations and fine-tunes."""
    if extension:
        tunes = [task for task in extension if task["kind"] == "fine-tune"]
        print(f"table E (context extension of rope): {len(extension) - len(tunes)} evaluations without "
              f"fine-tuning, {len(tunes)} fine-tunes of {tunes[0]['steps']} steps at 4x the training length, "
              f"~{sum(task['seconds'] for task in extension):.0f} s")
        for task in extension:
            print(f"  E {task['kind']:9s} {task['label']:40s} seed {task['seed']}  ~{task['seconds']:.0f} s")
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


def print_retrieval_plan(tasks: list[dict], cfg: StudyConfig, key: str = "retrieval") -> None:
    """Table G's part of ``--dry-run``: its runs (trained or to train) and configurations."""
    if not tasks:
        print("table G (use of context): skipped (--no-retrieval, or none of its schemes is studied)")
        return
    trains = [task for task in tasks if task["kind"] == "train"]
    runs = f"{len(trains)} run{'s' if len(trains) != 1 else ''}"
    g = cfg.tables[key]
    print(f"table G (use of context): {runs} ({g.seeds} seed{'s' if g.seeds != 1 else ''} "
          f"a row) with --mix {RECIPE.mix} ({g.preset} preset, {g.steps} steps, batch "
          f"{RECIPE.batch}), {len(tasks) - len(trains)} configurations scored at 1-16x in trained and held-out "
          f"formats, ~{sum(task['seconds'] for task in tasks):.0f} s")
    for task in tasks:
        state = ("exists" if task["exists"] else "to train") if task["kind"] == "train" else ""
        print(f"  G {task['kind']:9s} {task['label']:40s} {state:9s} ~{task['seconds']:.0f} s")



#: how ``--dry-run`` prints each table's tasks (any other table: :func:`print_table_plan`)
PLANS = {"extension": print_extension_plan, "retrieval": print_retrieval_plan}
