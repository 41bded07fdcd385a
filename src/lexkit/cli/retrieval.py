"""``lexkit retrieval TARGET``: does the model use its context? Exact match and answer bits of
needles hidden at distance (copy, passkey, multikey), on a grid of lengths x depths, per pattern.

TARGET is a run directory or hf:PATH (a Hugging Face causal LM: the standard passkey prompt of
Landmark Attention / YaRN / LongLoRA and RULER's multikey needles). Prints one table per pattern
(depths as rows, lengths as columns, exact match in percent), then accuracy over all depths with
its 95 % Wilson interval and the answer's bits per byte; ``--json``/``--csv``/``--plot`` write the
results only once every cell has been scored. See docs/retrieval.md.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys

from .. import checks
from ..attention import KERNELS
from ..layouts import check_pattern, check_scheme
from .table import format_table, length_label


def add_parser(sub):
    p = sub.add_parser("retrieval", help="exact match of needles at distance (copy, passkey, multikey)",
                       description=__doc__)
    p.add_argument("target", metavar="TARGET", help="a run directory written by `lexkit train`, or hf:PATH")
    p.add_argument("--task", default="passkey", metavar="TASK", help="copy, passkey or multikey (default: passkey)")
    p.add_argument("--lengths", metavar="L,L,...",
                   help="document lengths in bytes (default: the training length x 1, 2, 4, 8, 16, those long "
                   "enough for the needle)")
    p.add_argument("--depths", metavar="D,D,...", help="needle depths in percent, 0..100 (default: 0,10,...,100)")
    p.add_argument("--samples", type=int, default=10, metavar="N", help="documents per cell (default: 10)")
    p.add_argument("--size", type=int, metavar="N",
                   help="letters of a copy segment / digits of a key (default: 16 / 5)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="which documents (default: 0)")
    p.add_argument("--pattern", dest="patterns", action="append", metavar="SPEC",
                   help="attention pattern (causal, window[:W], bca[:W], sinks[:W,K=4]); repeatable (default: causal)")
    p.add_argument("--data", metavar="SPEC",
                   help="haystack of the byte tasks: a corpus spec whose validation documents are the filler "
                   "(default: the run's own corpus; stdlib for hf:)")
    p.add_argument("--scheme", metavar="SPEC",
                   help="score the trained weights under another scheme with the same tensors (as `lexkit eval`)")
    p.add_argument("--logn", action=argparse.BooleanOptionalAction, default=None,
                   help="log-n attention scaling (default: as the run trained)")
    p.add_argument("--rope-scaling", metavar="SPEC", help="hf: models: RoPE scaling through the config (yarn:4, ...)")
    p.add_argument("--cache", action=argparse.BooleanOptionalAction, default=None,
                   help="greedy decoding through the KV cache (default: where the pattern allows it)")
    p.add_argument("--json", metavar="FILE", help="write the report (JSON)")
    p.add_argument("--csv", metavar="FILE", help="write one row per cell (CSV)")
    p.add_argument("--plot", metavar="FILE.png", help="needle-in-a-haystack heatmaps and accuracy against length")
    p.add_argument("--device", default="auto", metavar="DEVICE", help="auto, cpu, cuda or mps (default: auto)")
    p.add_argument("--threads", type=int, metavar="N", help="CPU threads for torch")
    p.add_argument("--kernel", default="auto", choices=KERNELS, help="attention kernel (default: auto)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    return p


def parse_depths(text: str) -> list[float]:
    items = [item.strip() for item in text.split(",")]
    values = []
    for item in items:
        try:
            values.append(float(item))
        except ValueError:
            raise ValueError(f"--depths: {item!r} is not a number (give percents such as 0,50,100)") from None
    return values


def run(args) -> int:
    from .. import retrieval, tasks
    from ..device import resolve_device
    from ..specs import parse_lengths
    from ..subject import kind
    from ..subject import load as load_subject

    hf = args.target.startswith("hf:")
    style = "standard" if hf else "bytes"
    # everything that can be checked without the model is checked before it loads
    tasks.check_task(args.task)
    depths = parse_depths(args.depths) if args.depths is not None else list(retrieval.DEFAULT_DEPTHS)
    lengths = parse_lengths(args.lengths) if args.lengths is not None else None
    checks.lengths("--lengths", lengths or [], checks.MAX_EVAL_LENGTH)
    checks.number("--size", args.size)
    checks.number("--threads", args.threads, maximum=4096)
    retrieval.check_grid(args.task, lengths or [], depths, args.samples, style, args.size)
    for spec in args.patterns or ["causal"]:
        check_pattern(spec)
    kind(args.target).refuse(scheme=args.scheme, logn=args.logn, rope_scaling=args.rope_scaling)
    if hf and args.cache:
        raise ValueError("--cache is for lexkit runs: a hf: model decodes without lexkit's KV cache")
    if args.scheme is not None:

        check_scheme(args.scheme)
    for flag, path in (("--json", args.json), ("--csv", args.csv)):
        if path is not None:
            checks.writable(flag, path)
    if args.plot is not None:
        args.plot = checks.png_path("--plot", args.plot)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    subject = load_subject(args.target, device=str(resolve_device(args.device)), scheme=args.scheme,
                           logn=args.logn, rope_scaling=args.rope_scaling)
    info = subject.describe()
    if lengths is None:
        lengths = default_lengths(args, subject.train_len, style)
    haystack = data = None
    if args.task == "copy" or style == "bytes":
        docs, described = subject.documents(args.data)
        haystack, data = tasks.Haystack.from_documents(docs), described["spec"]
    rows = retrieval.score(subject, args.task, lengths, depths=depths, samples=args.samples,
                           patterns=args.patterns or ["causal"], haystack=haystack, seed=args.seed, size=args.size,
                           cache=args.cache, kernel=args.kernel, progress=args.progress and sys.stderr.isatty())
    report = build_report(args, info, rows, lengths, depths, style, data)
    write_outputs(report, args)
    print(format_report(report))
    if args.plot:
        print(f"wrote {args.plot}")
    return 0


def default_lengths(args, train_len: int | None, style: str) -> list[int]:
    """The default multiples of the training length (1-16x) whose length holds the needle."""
    from .. import retrieval, tasks

    if not train_len:
        raise ValueError(f"{args.target} records no training length: give --lengths")
    need = tasks.minimum_length(args.task, style, args.size)
    lengths = [train_len * k for k in retrieval.DEFAULT_MULTIPLES if train_len * k >= need]
    if not lengths:
        raise ValueError(f"the {args.task} needle and question need {need} bytes, more than "
                         f"{retrieval.DEFAULT_MULTIPLES[-1]}x the training length {train_len}: give --lengths")
    return lengths


def build_report(args, info: dict, rows, lengths, depths, style: str, haystack: str | None) -> dict:
    from .. import __version__, retrieval

    return {
        "version": __version__,
        "target": args.target,
        "scheme": info["scheme"],
        **({"trained_scheme": info["trained_scheme"]} if "trained_scheme" in info else {}),
        "logn": info.get("logn", False),
        "train_len": info["train_len"],
        "task": args.task,
        "style": style,
        "size": args.size,
        "seed": args.seed,
        "haystack": haystack,
        "samples": args.samples,
        "lengths": list(lengths),
        "depths": list(depths),
        "patterns": list(dict.fromkeys(r.pattern for r in rows)),
        "rows": [r.to_json() for r in rows],
        "summary": retrieval.summary(rows),
    }


def write_outputs(report: dict, args) -> None:
    """The files first: a reader that closes the pipe early (``| head``) must not lose them."""
    from .. import plots
    from ..runs import atomic_write, write_json

    if args.json:
        write_json(args.json, report)
    if args.csv:
        buffer = io.StringIO()
        fields = list(report["rows"][0])
        writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(report["rows"])
        atomic_write(args.csv, buffer.getvalue())
    if args.plot:
        plots.retrieval(report, args.plot)


def format_report(report: dict) -> str:
    """Header; per pattern, exact match (%) by depth (rows) and length (columns); then the
    summary over depths: accuracy with its 95 % interval and the answer's bits per byte."""
    lengths, train_len = report["lengths"], report["train_len"]
    rows = report["rows"]
    chance = rows[0]["chance_bits"] if rows else float("nan")
    lines = [
        f"{report['target']}  scheme {report['scheme']}"
        + (f" (trained as {report['trained_scheme']})" if report.get("trained_scheme") else "")
        + f"  train_len {train_len}",
        f"task {report['task']} ({report['style']} style), {report['samples']} documents per cell; "
        f"chance {chance:.2f} bits per answer byte",
    ]
    cell = {(r["pattern"], r["length"], r["depth"]): r for r in rows}
    header = ["depth"] + [length_label(n, train_len) for n in lengths]
    for pattern in report["patterns"]:
        table = [header]
        for d in report["depths"]:
            table.append([f"{d:g}%"] + [f"{100 * cell[(pattern, n, d)]['accuracy']:.0f}" for n in lengths])
        lines += ["", f"exact match (%), {pattern}"] + format_table(table)
    summary = {(s["pattern"], s["length"]): s for s in report["summary"]}
    table = [["pattern"] + [length_label(n, train_len) for n in lengths]]
    for pattern in report["patterns"]:
        table.append([pattern] + [
            f"{100 * s['accuracy']:.0f} [{100 * s['low']:.0f}-{100 * s['high']:.0f}]"
            for s in (summary[(pattern, n)] for n in lengths)])
    lines += ["", "exact match (%) over all depths [95% interval]"] + format_table(table)
    table = [["pattern"] + [length_label(n, train_len) for n in lengths]]
    for pattern in report["patterns"]:
        table.append([pattern] + [f"{summary[(pattern, n)]['answer_bits']:.3f}" for n in lengths])
    lines += ["", "answer bits per byte (teacher-forced)"] + format_table(table)
    return "\n".join(lines)
