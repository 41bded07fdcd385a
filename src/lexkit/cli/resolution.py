"""``lexkit resolution``: attention resolution R, analytic (before a run) or empirical (of a run).

Analytic, no training::

    lexkit resolution --scheme rope --scheme xpos --scheme alibi --lengths 1024,2048 [--pattern bca:1024]

Empirical, on a trained run's validation text::

    lexkit resolution RUN_DIR [--lengths 128,256,1024] [--pattern window] [--texts 8]

Both, of a Hugging Face causal LM (its own positions from its config, then the score hook on text)::

    lexkit resolution hf:PATH [--rope-scaling yarn:4] [--data stdlib]

R is per head, averaged over heads (and, empirically, over layers); 0 <= R <= 1.
See ``docs/resolution.md``.
"""

from __future__ import annotations

import argparse
import sys

from .. import checks
from .. import resolution as res
from ..instruments.resolution import figures, report
from ..runs import write_json
from ..specs import parse_lengths
from .eval import add_hf_arguments

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
    p.add_argument("--data", metavar="SPEC",
                   help="text for the empirical R (default: a run's validation split; an hf: model: stdlib's)")
    add_hf_arguments(p.add_argument_group("Hugging Face models (hf:PATH; needs pip install 'lexkit[hf]')"))
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
    if args.run_dir is None:
        for flag in ("rope_scaling", "dtype", "data"):
            if getattr(args, flag) is not None:
                raise ValueError(f"--{flag.replace('_', '-')} needs a model (RUN_DIR or hf:PATH)")
        return _analytic(args)
    from ..subject import kind, load

    scheme = args.scheme[0] if args.scheme else None
    kind(args.run_dir).refuse(heads=args.heads, head_dim=args.head_dim, seed=args.seed, train_len=args.train_len,
                              scheme=scheme, logn=args.logn, rope_scaling=args.rope_scaling, dtype=args.dtype)
    if args.scheme and len(args.scheme) > 1:
        raise ValueError("with a RUN_DIR, --scheme SPEC (once) measures the run under that scheme")
    subject = load(args.run_dir, scheme=scheme, logn=args.logn, rope_scaling=args.rope_scaling, dtype=args.dtype)
    if subject.model.unit == "tokens":  # its own positions: the analytic R too
        return _model(args, subject)
    return _empirical(args, subject)


#: heads x head dimension of the analytic form, and --texts/--batch: at most this (memory)
MAX_WIDTH = 4096


# -- analytic -----------------------------------------------------------------------------------
def _analytic(args) -> int:
    if not args.scheme:
        raise ValueError("give a RUN_DIR (empirical) or at least one --scheme SPEC (analytic)")
    if args.texts is not None:
        raise ValueError("--texts is for the empirical form (lexkit resolution RUN_DIR)")
    heads = 16 if args.heads is None else args.heads
    head_dim = 64 if args.head_dim is None else args.head_dim
    seed = 0 if args.seed is None else args.seed
    if heads * head_dim > MAX_WIDTH:
        raise ValueError(f"--heads {heads} x --head-dim {head_dim} = {heads * head_dim}: at most {MAX_WIDTH} (memory)")
    lengths = parse_lengths(args.lengths if args.lengths is not None else ANALYTIC_LENGTHS)
    checks.number("--train-len", args.train_len, maximum=checks.MAX_TRAIN_LEN)
    extra = {"train_len": args.train_len, "logn": bool(args.logn)}
    docs = [res.analytic(spec, lengths, args.pattern, heads=heads, head_dim=head_dim, seed=seed, **extra)
            for spec in args.scheme]
    report.require_finite([r for d in docs for r in d["results"]], "check the scheme's parameters")
    print(report.analytic_text(docs, lengths, heads=heads, head_dim=head_dim, seed=seed))
    if args.json:
        write_output(args.json, report.analytic_document(docs, heads=heads, head_dim=head_dim, seed=seed))
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
        figures.plot_analytic(curves, table, args.plot, marks=sorted(set(lengths) - {longest}),
                              title=f"analytic, {heads} heads x {head_dim}, pattern {docs[0]['pattern']}")
        print(f"wrote {args.plot}")
    return 0


# -- empirical ----------------------------------------------------------------------------------
def _empirical(args, subject) -> int:
    texts = 8 if args.texts is None else args.texts
    doc = res.empirical_run(subject, args.lengths, args.pattern, texts_per_length=texts, batch_size=args.batch,
                            progress=sys.stderr.isatty(), data=args.data)
    report.require_finite(doc["results"], "the run's weights are damaged or its training diverged")
    print(report.empirical_text(doc, texts))
    if args.json:
        write_output(args.json, res.to_json(doc))
    if args.plot:
        figures.plot_empirical(doc, args.plot)
        print(f"wrote {args.plot}")
    return 0


# -- a model with its own positions (hf:PATH): analytic, then empirical ----------------------------
def _model(args, subject) -> int:
    """The analytic R from the model's own positions (RoPE theta, rotary dims, scaling; ALiBi
    slopes; the learned table), then empirical R and entropy per layer through the score hook; on a
    model whose layers differ, analytic rows per group of equal layers and empirical means per
    layer type."""
    model = subject.model
    lengths = parse_lengths(args.lengths if args.lengths is not None else res.resolution_lengths(subject))
    analytic = res.analytic(model, lengths, args.pattern)
    empirical = None
    if model.hook_refusal() is None:
        texts = 8 if args.texts is None else args.texts
        empirical = res.empirical_run(subject, lengths, args.pattern, texts_per_length=texts, batch_size=args.batch,
                                      progress=sys.stderr.isatty(), data=args.data)
    print(report.model_text(subject, analytic, empirical, lengths, args.data))
    if args.json:
        write_output(args.json, report.model_document(subject.source, analytic, empirical, model))
    if args.plot:
        if empirical is not None and any(r.get("resolution") is not None for r in empirical["results"]):
            figures.plot_empirical(empirical, args.plot)
        else:
            curve = res.model_curve(model, max(lengths), args.pattern)
            table = {model.cfg.scheme: {r["length"]: r["resolution"] for r in analytic["results"]}}
            figures.plot_analytic({model.cfg.scheme: curve}, table, args.plot, title=f"{subject.source}, analytic")
        print(f"wrote {args.plot}")
    return 0


# -- output -------------------------------------------------------------------------------------
def write_output(path: str, obj: dict) -> None:
    """``--json``: strict JSON, atomically, like every JSON lexkit writes; says where."""
    write_json(checks.writable("--json", path), obj)
    print(f"wrote {path}")
