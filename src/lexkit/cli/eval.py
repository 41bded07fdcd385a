"""``lexkit eval``: bits per byte of a trained run at many lengths and attention patterns.

The paper's protocol by default (every length scores the same bytes: the first max(lengths)
bytes of every document that long); ``--stride S`` for sliding windows. Prints a table (lengths
as columns, one row per pattern) and the loss by position; ``--json``/``--csv`` write the
results (atomically, and only once the evaluation has succeeded).
"""

from __future__ import annotations

import argparse
import csv
import io
import sys

from .. import attention, checks
from ..attention import KERNELS
from ..attention.cache import require_block_kernel
from . import hf as hf_cli
from .table import format_table, length_label


def add_parser(sub):
    p = sub.add_parser(
        "eval", help="bits per byte of a run at many lengths and patterns", description=__doc__,
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by `lexkit train`, or hf:PATH "
                   "(a Hugging Face causal LM: a save_pretrained directory or a cached hub name)")
    p.add_argument(
        "--lengths", metavar="L,L,...",
        help="comma-separated lengths in bytes (default: the training length x 1/2, 1, 2, 4, 8, 16)",
    )
    p.add_argument(
        "--pattern", dest="patterns", action="append", metavar="SPEC",
        help="attention pattern (causal, window[:W], bca[:W], sinks[:W,K=4,pos=text|cache]; "
        "W defaults to the training length); "
        "repeatable (default: causal)",
    )
    p.add_argument(
        "--data", metavar="SPEC",
        help="evaluate on these documents: stdlib (its validation split), a file, directory or glob, "
        "or hf:NAME[:CONFIG[:SPLIT]] (all of their documents); default: the run's own validation split",
    )
    p.add_argument("--stride", type=int, metavar="S",
                   help="sliding windows advancing by S bytes (default: non-overlapping chunks)")
    p.add_argument("--max-docs", type=int, metavar="N", help="use at most N documents")
    p.add_argument("--max-bytes", type=int, metavar="N",
                   help="score at most about N bytes per length (at least one document)")
    p.add_argument("--batch-size", type=int, metavar="N",
                   help="windows per forward pass (default: by length, 8192 inputs on CPU)")
    p.add_argument("--json", metavar="FILE", help="write the full results (JSON)")
    p.add_argument("--csv", metavar="FILE", help="write one row per length and pattern (CSV)")
    p.add_argument("--device", default="auto", metavar="DEVICE", help="auto, cpu, cuda or mps (default: auto)")
    p.add_argument("--threads", type=int, metavar="N", help="CPU threads for torch")
    p.add_argument("--kernel", default="auto", choices=KERNELS, help="attention kernel (default: auto)")
    p.add_argument(
        "--scheme", metavar="SPEC",
        help="evaluate the trained weights under another scheme with the same tensors, no retraining "
        "(e.g. rope:scaling=yarn,factor=4, rerope:w=64; original_len and w default to the training length)",
    )
    p.add_argument("--logn", action=argparse.BooleanOptionalAction, default=None,
                   help="log-n attention scaling at evaluation (default: as the run trained)")
    p.add_argument(
        "--stream", action=argparse.BooleanOptionalAction, default=None,
        help="feed each window in segments through a KV cache trimmed to the pattern's reach (memory flat in the "
        "length); default: auto, streaming under window/bca past one segment (4096 tokens)",
    )
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    hf_cli.add_eval_arguments(p)
    return p


def run(args) -> int:
    from ..device import resolve_device
    from ..evaluate import csv_rows, evaluate_run
    from ..specs import parse_lengths

    # Everything that can be checked without the model is checked before it loads.
    lengths = parse_lengths(args.lengths) if args.lengths is not None else None
    checks.lengths("--lengths", lengths or [], checks.MAX_EVAL_LENGTH)
    patterns = args.patterns or ["causal"]
    for spec in patterns:
        attention.create(spec, default_window=2)  # syntax and parameter values
    if args.scheme is not None:
        from ..positions import canonical

        canonical(args.scheme)  # syntax and parameter values
    for flag, value in (("--stride", args.stride), ("--max-docs", args.max_docs), ("--max-bytes", args.max_bytes),
                        ("--batch-size", args.batch_size), ("--threads", args.threads)):
        if value is not None and value <= 0:
            raise ValueError(f"{flag} must be a positive integer, got {value}")
        checks.number(flag, value, maximum=checks.MAX_COUNT if flag != "--threads" else 4096)
    if args.stream:
        require_block_kernel(args.kernel, "--stream", flag=True, verb="stream")
    for flag, path in (("--json", args.json), ("--csv", args.csv)):
        if path is not None:
            checks.writable(flag, path)
    device = str(resolve_device(args.device))
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    if hf_cli.is_hf(args.run_dir):  # a Hugging Face causal LM (lexkit.hf) in place of a run
        for flag, value in (("--scheme", args.scheme), ("--logn", args.logn)):
            if value is not None:
                raise ValueError(f"{flag} is for lexkit runs (a hf: model's RoPE scaling is --rope-scaling)")
        return hf_cli.run_eval(args, lengths, patterns, device)
    for flag in ("rope_scaling", "dtype", "max_tokens", "plot"):
        if getattr(args, flag) is not None:
            raise ValueError(f"--{flag.replace('_', '-')} is for hf:PATH models")
    from ..runs import atomic_write, write_json

    report = evaluate_run(
        args.run_dir, lengths=lengths, patterns=patterns, data=args.data, stride=args.stride,
        max_docs=args.max_docs, max_bytes=args.max_bytes, batch_size=args.batch_size, kernel=args.kernel,
        device=device, progress=args.progress and sys.stderr.isatty(), scheme=args.scheme, logn=args.logn,
        stream="auto" if args.stream is None else args.stream,
    )
    # the files first: a reader that closes the pipe early (`| head`) must not lose them
    if args.json:
        write_json(args.json, report)
    if args.csv:
        buffer = io.StringIO()
        fields = list(csv_rows(report)[0]) if report["results"] else []
        writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(csv_rows(report))
        atomic_write(args.csv, buffer.getvalue())
    print(format_report(report))
    return 0


# -- terminal output ------------------------------------------------------------------------------
def format_report(report: dict) -> str:
    """The bpb table (lengths as columns, one row per pattern), bytes scored, unavailable reasons,
    then loss by position per pattern."""
    lengths = report["lengths"]
    patterns = report["patterns"]
    cell = {(r["length"], r["pattern"]): r for r in report["results"]}
    data = report["data"]
    stride = report.get("stride")
    lines = [
        f"run {report['run']}  scheme {report['scheme']}"
        + (f" (trained as {report['trained_scheme']})" if report.get("trained_scheme") else "")
        + ("  log-n" if report.get("logn") else "") + f"  train_len {report['train_len']}",
        f"data {data['spec']} ({data['split']}): {data['documents']} document"
        f"{'' if data['documents'] == 1 else 's'} x {data['bytes_per_document']:,} bytes"
        f" = {data['documents'] * data['bytes_per_document']:,} bytes scored per length"
        + (f"; sliding windows, stride {stride}" if stride else "; non-overlapping chunks"),
        "",
        "bits per byte (lower is better)",
    ]
    notes: dict[str, list[int]] = {}
    rows = [["pattern"] + [length_label(n, report["train_len"]) for n in lengths]]
    for pat in patterns:
        row = [pat]
        for n in lengths:
            r = cell.get((n, pat))
            if r is None or r["bpb"] is None:
                row.append("-")
                if r is not None:
                    notes.setdefault(r["unavailable"], []).append(n)
            else:
                row.append(f"{r['bpb']:.4f}")
        rows.append(row)
    lines += format_table(rows)
    for reason, at in notes.items():
        lines.append(f"  - at {', '.join(map(str, sorted(set(at))))}: {reason}")
    lines.append("  (x = multiple of the training length)")

    for pat in patterns:
        buckets = [b for b in report["by_position"] if b["pattern"] == pat]
        if not buckets:
            continue
        spans = sorted({(b["from"], b["to"]) for b in buckets})
        at = {(b["from"], b["to"], b["length"]): b for b in buckets}
        lines += ["", f"bits per byte by position within the chunk, pattern {pat} (* = beyond the training length)"]
        rows = [["positions"] + [str(n) for n in lengths]]
        for lo, hi in spans:
            beyond = report["train_len"] is not None and lo >= report["train_len"]
            label = f"{lo}" if hi == lo + 1 else f"{lo}-{hi - 1}"
            rows.append([label + (" *" if beyond else "")] + [
                f"{at[(lo, hi, n)]['bpb']:.4f}" if (lo, hi, n) in at else "" for n in lengths
            ])
        lines += format_table(rows)
    return "\n".join(lines)

