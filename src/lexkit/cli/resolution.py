"""``lexkit resolution``: attention resolution R, analytic (before a run) or empirical (of a run).

Analytic, no training::

    lexkit resolution --scheme rope --scheme xpos --scheme alibi --lengths 1024,2048 [--pattern bca:1024]

Empirical, on a trained run's validation text::

    lexkit resolution RUN_DIR [--lengths 128,256,1024] [--pattern window] [--texts 8]

R is per head, averaged over heads (and, empirically, over layers); 0 <= R <= 1.
See ``docs/resolution.md``.
"""

from __future__ import annotations

import argparse
import math
import sys

from .. import checks, plots
from .. import resolution as res
from ..runs import write_json
from ..specs import parse_lengths
from . import hf as hf_cli
from .table import number, print_table

ANALYTIC_LENGTHS = "1024,2048"


def add_parser(sub):
    p = sub.add_parser(
        "resolution",
        help="attention resolution R: analytic from --scheme, or empirical from a RUN_DIR",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dir", nargs="?", metavar="RUN_DIR",
                   help="a training run (empirical form), or hf:PATH (a Hugging Face causal LM: both forms)")
    p.add_argument("--scheme", action="append", metavar="SPEC",
                   help="position scheme spec (analytic form); repeatable")
    p.add_argument("--heads", type=int, default=None, help="heads (analytic; default 16)")
    p.add_argument("--head-dim", type=int, default=None, help="head dimension (analytic; default 64)")
    p.add_argument("--seed", type=int, default=None, help="seed of learnable initial values (analytic; default 0)")
    p.add_argument("--lengths", default=None, metavar="N,N,...",
                   help=f"lengths (default: analytic {ANALYTIC_LENGTHS}; empirical the training length and twice it)")
    p.add_argument("--pattern", default="causal", metavar="SPEC",
                   help="attention pattern: causal, window:W, bca:W (analytic needs W; a run defaults W to its "
                        "training length)")
    p.add_argument("--train-len", type=int, default=None, metavar="L",
                   help="analytic: the training length the schemes assume (a scaled RoPE's original_len, "
                   "ReRoPE's w, a pattern's W, log-n's L)")
    p.add_argument("--logn", action=argparse.BooleanOptionalAction, default=None,
                   help="log-n attention scaling (analytic: needs --train-len; empirical: overrides the run's)")
    p.add_argument("--texts", type=int, default=None, help="validation texts per length (empirical; default 8)")
    p.add_argument("--batch", type=int, default=1, help="texts per forward pass (empirical; default 1)")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--plot", metavar="FILE.png", help="write a figure (s[n] by distance, R by length)")
    hf_cli.add_model_arguments(p).add_argument(
        "--data", metavar="SPEC", help="text for the empirical R of an hf: model (default: stdlib)")
    return p


def run(args) -> int:
    # outputs and numbers are checked before any work
    if args.json is not None:
        checks.writable("--json", args.json)
    if args.plot is not None:
        args.plot = checks.png_path("--plot", args.plot)
    for flag, value in (("--heads", args.heads), ("--head-dim", args.head_dim), ("--texts", args.texts),
                        ("--batch", args.batch)):
        checks.number(flag, value, maximum=MAX_WIDTH)
    checks.number("--seed", args.seed, maximum=2**63 - 1, strict=False)
    if args.lengths is not None:
        checks.lengths("--lengths", parse_lengths(args.lengths), checks.MAX_RESOLUTION_LENGTH)
    if hf_cli.is_hf(args.run_dir):  # a Hugging Face causal LM (lexkit.hf)
        return hf_cli.run_resolution(args)
    for flag in ("rope_scaling", "dtype", "data"):
        if getattr(args, flag) is not None:
            raise ValueError(f"--{flag.replace('_', '-')} is for hf:PATH models")
    if args.run_dir is not None:
        return _empirical(args)
    return _analytic(args)


#: heads x head dimension of the analytic form, and --texts/--batch: at most this (memory)
MAX_WIDTH = 4096


def _require_finite(results: list[dict], what: str) -> None:
    """A NaN or inf R means NaN/inf scores (damaged weights, or a scheme's values overflowing)."""
    for r in results:
        if r.get("resolution") is not None and not math.isfinite(r["resolution"]):
            raise ValueError(f"R of {r.get('scheme', what)} at length {r['length']} is {r['resolution']}: "
                             f"the attention scores are not finite ({what})")


# -- analytic -----------------------------------------------------------------------------------
def _analytic(args) -> int:
    if not args.scheme:
        raise ValueError("give a RUN_DIR (empirical) or at least one --scheme SPEC (analytic)")
    if args.texts is not None:
        raise ValueError("--texts is for the empirical form (lexkit resolution RUN_DIR)")
    heads = 16 if args.heads is None else args.heads
    head_dim = 64 if args.head_dim is None else args.head_dim
    seed = 0 if args.seed is None else args.seed
    if heads <= 0 or head_dim <= 0:
        raise ValueError(f"--heads and --head-dim must be positive, got {heads} and {head_dim}")
    if heads * head_dim > MAX_WIDTH:
        raise ValueError(f"--heads {heads} x --head-dim {head_dim} = {heads * head_dim}: at most {MAX_WIDTH} (memory)")
    lengths = parse_lengths(args.lengths if args.lengths is not None else ANALYTIC_LENGTHS)
    if args.train_len is not None and args.train_len <= 0:
        raise ValueError(f"--train-len must be a positive integer, got {args.train_len}")
    if args.logn and args.train_len is None:
        raise ValueError("--logn needs --train-len L in the analytic form (log-n scales by ln(m+1)/ln L)")
    extra = {"train_len": args.train_len, "logn": bool(args.logn)}
    docs = [res.analytic(spec, lengths, args.pattern, heads=heads, head_dim=head_dim, seed=seed, **extra)
            for spec in args.scheme]
    pattern = docs[0]["pattern"]
    _require_finite([r for d in docs for r in d["results"]], "check the scheme's parameters")

    print(f"attention resolution R, analytic: {heads} heads x {head_dim}, pattern {pattern}, seed {seed} "
          "(mean over heads; 0 <= R <= 1)")
    rows = [["scheme"] + [str(n) for n in lengths]]
    notes = []
    for doc in docs:
        row = [doc["scheme"]]
        for r in doc["results"]:
            row.append(number(r["resolution"]))
            if r.get("note"):
                notes.append(f"{doc['scheme']} at {r['length']}: {r['note']}")
        rows.append(row)
    print_table(rows)
    for note in notes:
        print(f"n/a: {note}")

    if args.json:
        out = {
            "version": res.FORMAT_VERSION, "lexkit": docs[0]["lexkit"], "source": "analytic",
            "scheme": docs[0]["scheme"] if len(docs) == 1 else [d["scheme"] for d in docs],
            "heads": heads, "head_dim": head_dim, "seed": seed, "pattern": pattern,
            "results": [r for d in docs for r in d["results"]],
        }
        write_output(args.json, out)
    if args.plot:
        longest = max(lengths)
        curves = {}
        for doc in docs:
            try:
                curves[doc["scheme"]] = res.analytic_curve(doc["scheme"], longest, args.pattern,
                                                           heads=heads, head_dim=head_dim, seed=seed, **extra)
            except ValueError:
                pass  # undefined at this length (learned past its table): noted in the table
        table = {d["scheme"]: {r["length"]: r["resolution"] for r in d["results"]} for d in docs}
        plots.plot_analytic(curves, table, args.plot, marks=sorted(set(lengths) - {longest}),
                          title=f"analytic, {heads} heads x {head_dim}, pattern {pattern}")
        print(f"wrote {args.plot}")
    return 0


# -- empirical ----------------------------------------------------------------------------------
def _empirical(args) -> int:
    extra = [flag for flag, value in (("--heads", args.heads), ("--head-dim", args.head_dim),
                                      ("--seed", args.seed), ("--train-len", args.train_len)) if value is not None]
    if extra:
        raise ValueError(f"{', '.join(extra)}: only for the analytic form (no RUN_DIR); "
                         "a run's model fixes its shape and length")
    if args.scheme and len(args.scheme) > 1:
        raise ValueError("with a RUN_DIR, --scheme SPEC (once) measures the run under that scheme")
    texts = 8 if args.texts is None else args.texts
    if texts <= 0 or args.batch <= 0:
        raise ValueError(f"--texts and --batch must be positive, got {texts} and {args.batch}")
    doc = res.empirical_run(args.run_dir, args.lengths, args.pattern, texts_per_length=texts,
                            batch_size=args.batch, progress=sys.stderr.isatty(),
                            scheme=args.scheme[0] if args.scheme else None, logn=args.logn)
    results = doc["results"]
    _require_finite(results, "the run's weights are damaged or its training diverged")
    print(f"attention resolution R, empirical: {doc['run']} ({doc['scheme']}, trained at {doc['train_len']}), "
          f"pattern {doc['pattern']}, {texts} texts per length (mean over heads; 0 <= R <= 1)")
    head = ["layer"] + [str(r["length"]) for r in results]
    for key, total, title in (("per_layer", "resolution", "R"), ("entropy_per_layer", "entropy", "entropy (nats)")):
        if title != "R":
            print(f"\n{title}")
        rows = [head]
        for layer in range(doc["layers"]):
            rows.append([str(layer)] + [number(r[key][layer] if r.get(key) else None) for r in results])
        rows.append(["mean"] + [number(r[total]) for r in results])
        print_table(rows)
    print("texts: " + ", ".join(f"{r['length']}: {r['texts']}" for r in results))
    for r in results:
        if r.get("note"):
            print(f"n/a at {r['length']}: {r['note']}")
    if args.json:
        write_output(args.json, res.to_json(doc))
    if args.plot:
        plots.plot_empirical(doc, args.plot)
        print(f"wrote {args.plot}")
    return 0


# -- output -------------------------------------------------------------------------------------
def write_output(path: str, obj: dict) -> None:
    """``--json``: strict JSON, atomically, like every JSON lexkit writes; says where."""
    write_json(checks.writable("--json", path), obj)
    print(f"wrote {path}")
