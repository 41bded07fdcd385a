"""``lexkit retrieval TARGET``: does the model use its context? Exact match and answer bits of
needles hidden at distance (copy, passkey, multikey; kvthread and ordinal, which no copying of a
needle's format answers), on a grid of lengths x depths, per pattern. ``--task`` takes a task's
spec: its parameters after a colon (``kvthread:hops=3,direction=backward``, ``ordinal:which=2``;
``lexkit tasks`` lists them).

TARGET is a run directory or hf:PATH (a Hugging Face causal LM: the standard passkey prompt of
Landmark Attention / YaRN / LongLoRA, RULER's multikey needles, and the standard styles of
kvthread and ordinal). Prints one table per pattern
(depths as rows, lengths as columns, exact match in percent), then accuracy over all depths with
its 95 % Wilson interval and the answer's bits per byte; ``--json``/``--csv``/``--plot`` write the
results only once every cell has been scored. The report is built by the library,
:func:`lexkit.retrieval.retrieval_run`, as ``lexkit eval``'s is; this module parses and prints. See
docs/retrieval.md.
"""

from __future__ import annotations

import argparse
import sys

from .. import threads
from ..attention import KERNELS
from ..instruments import layout_lines
from ..notation import length_label, percent
from ..render import text_table
from ..retrieval import DEFAULT_DEPTHS
from . import options
from .needle_options import NeedleDefaults, add_needle_options, needle_values

#: what is scored when a needle flag is left out
DEFAULTS = NeedleDefaults(task="passkey", depths=DEFAULT_DEPTHS, samples=10)


def add_parser(sub):
    p = sub.add_parser("retrieval", help="exact match of needles at distance (copy, passkey, kvthread, ...)",
                       description=__doc__)
    p.add_argument("target", metavar="TARGET", help="a run directory written by `lexkit train`, or hf:PATH")
    add_needle_options(p, DEFAULTS, task_help=" (copy, passkey, multikey, induction, kvthread, ordinal, or one "
                       "--import registers): kvthread:hops=3,direction=backward, ordinal:count=6,which=2")
    p.add_argument("--data", metavar="SPEC",
                   help="haystack of the byte tasks: a corpus spec whose validation documents are the filler "
                   "(default: the run's own corpus; stdlib for hf:)")
    p.add_argument("--scheme", metavar="SPEC",
                   help="score the trained weights under another scheme with the same tensors (as `lexkit eval`)")
    p.add_argument("--logn", action=argparse.BooleanOptionalAction, default=None,
                   help="log-n attention scaling (default: as the run trained)")
    p.add_argument("--add", metavar="[SELECTOR=]MODIFIER",
                   help="score the trained weights with layer modifiers that hold no learned state added, no "
                   "retraining: topk:4 (every layer), global=topk:4, L1=softcap:30;local=adaptive (lexkit layouts "
                   "lists them)")
    p.add_argument("--rope-scaling", metavar="SPEC", help="hf: models: RoPE scaling through the config (yarn:4, ...)")
    p.add_argument("--cache", action=argparse.BooleanOptionalAction, default=None,
                   help="greedy decoding through the KV cache (default: where the pattern allows it)")
    p.add_argument("--json", metavar="FILE", help="write the report (JSON)")
    p.add_argument("--csv", metavar="FILE", help="write one row per cell (CSV)")
    p.add_argument("--plot", metavar="FILE.png", help="needle-in-a-haystack heatmaps and accuracy against length")
    p.add_argument("--device", default="auto", metavar="DEVICE", help="auto, cpu, cuda or mps (default: auto)")
    p.add_argument("--threads", type=int, metavar="N", help=threads.HELP)
    p.add_argument("--kernel", default="auto", choices=KERNELS, help="attention kernel (default: auto)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    return p


def run(args) -> int:
    from .. import plots, retrieval

    # what only the command line knows is checked here; everything else by the library, before it loads
    values = needle_values(args, DEFAULTS)
    options.check_outputs(args)
    device = options.device(args)
    report = retrieval.retrieval_run(
        args.target, values.pop("task"), **values, data=args.data, scheme=args.scheme, logn=args.logn, add=args.add,
        rope_scaling=args.rope_scaling, cache=args.cache, kernel=args.kernel, device=device,
        progress=args.progress and sys.stderr.isatty())
    options.write_outputs(args, report, retrieval.csv_text, plots.retrieval)
    print(format_report(report))
    if args.plot:
        print(f"wrote {args.plot}")
    return 0


def format_report(report: dict) -> str:
    """Header; per pattern, exact match (%) by depth (rows) and length (columns); then the
    summary over depths: accuracy with its 95 % interval and the answer's bits per byte.
    Percentages are whole unless that would round them to 0 or 100 (:func:`lexkit.notation.percent`)."""
    lengths, train_len = report["lengths"], report["train_len"]
    rows = report["rows"]
    lines = [
        f"{report['target']}  scheme {report['scheme']}"
        + (f" (trained as {report['trained_scheme']})" if report.get("trained_scheme") else "")
        + f"  train_len {train_len}",
        f"task {report['task']}" + (f", format {report['format']}" if report.get("format") else "")
        + f" ({report['style']} style), {report['samples']} documents per cell, lengths in "
        f"{report.get('unit', 'bytes')}; {chance_line(report)}",
    ]
    lines[1:1] = layout_lines(report)
    cell = {(r["pattern"], r["length"], r["depth"]): r for r in rows}
    header = ["depth"] + [length_label(n, train_len) for n in lengths]
    for pattern in report["patterns"]:
        table = [header]
        for d in report["depths"]:
            table.append([f"{d:g}%"] + [percent(cell[(pattern, n, d)]["accuracy"]) for n in lengths])
        lines += ["", f"exact match (%), {pattern}"] + text_table(table)
    summary = {(s["pattern"], s["length"]): s for s in report["summary"]}
    table = [["pattern"] + [length_label(n, train_len) for n in lengths]]
    for pattern in report["patterns"]:
        table.append([pattern] + [
            f"{percent(s['accuracy'])} [{percent(s['low'])}-{percent(s['high'])}]"
            for s in (summary[(pattern, n)] for n in lengths)])
    lines += ["", "exact match (%) over all depths [95% interval]"] + text_table(table)
    lines += candidate_lines(report)
    table = [["pattern"] + [length_label(n, train_len) for n in lengths]]
    for pattern in report["patterns"]:
        table.append([pattern] + [f"{summary[(pattern, n)]['answer_bits']:.3f}" for n in lengths])
    lines += ["", "answer bits per byte (teacher-forced)"] + text_table(table)
    return "\n".join(lines)


def candidate_lines(report: dict) -> list[str]:
    """For a task whose documents hold other candidates of the answer's kind (kvthread, ordinal,
    multikey): per pattern and length, the exact match of guessing uniformly among them and how
    often the model's answer is some candidate, right or not (over all depths); none otherwise."""
    rows = [r for r in report["rows"] if r.get("guess") is not None]
    if not rows:
        return []
    lengths, train_len = report["lengths"], report["train_len"]
    pooled: dict[tuple[str, int], list[float]] = {}
    for r in rows:
        total = pooled.setdefault((r["pattern"], r["length"]), [0, 0.0, 0.0])
        total[0] += r["samples"]
        total[1] += r["guess"] * r["samples"]
        total[2] += r["candidate"] * r["samples"]
    table = [["pattern"] + [length_label(n, train_len) for n in lengths]]
    for pattern in report["patterns"]:
        cells = []
        for n in lengths:
            samples, guess, some = pooled[pattern, n]
            cells.append(f"{percent(guess / samples)} / {percent(some / samples)}")
        table.append([pattern, *cells])
    return ["", "guessing among a document's candidates / the answer is some candidate, right or not (%, over all "
            "depths): exact match at the guess level is no use of context"] + text_table(table)


def chance_line(report: dict) -> str:
    """What a uniform guess scores: its bits per answer byte, and how often it matches a whole
    answer (alphabet ** -symbols: 3.8 % for one letter, so a tiny --size is not read as use of
    context)."""
    from .. import tasks

    if not report["rows"]:
        return "no cells"
    bits = report["rows"][0]["chance_bits"]
    symbols = report["size"] or tasks.get(report["task"]).default_size(report["style"])
    match = 100 * 2.0 ** (-bits * symbols)
    return (f"chance {bits:.2f} bits per answer byte, exact match by a uniform guess "
            f"{f'{match:.2g}' if match >= 0.01 else '<0.01'} %")
