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

from ..core import checks
from ..core.specs import parse_lengths
from ..instruments.base import get
from ..instruments.resolution import ResolutionOptions
from ..instruments.resolution.forms import ANALYTIC_LENGTHS
from .eval import add_hf_arguments
from .instrument import measure_and_write

#: heads x head dimension of the analytic form, and --texts/--batch: at most this (memory)
MAX_WIDTH = 4096


def add_parser(sub):
    p = sub.add_parser(
        "resolution",
        help="attention resolution R: analytic from --scheme, or empirical from a RUN_DIR",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", nargs="?", metavar="RUN_DIR",
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
    add_hf_arguments(p.add_argument_group("Hugging Face models (hf:PATH; needs pip install -e '.[hf]')"))
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
    values = ResolutionOptions(
        schemes=tuple(args.scheme or ()), heads=args.heads, head_dim=args.head_dim, seed=args.seed,
        lengths=args.lengths, pattern=args.pattern, train_len=args.train_len, logn=args.logn, texts=args.texts,
        batch=args.batch, data=args.data, rope_scaling=args.rope_scaling, dtype=args.dtype)
    if args.target is None:
        for flag in ("rope_scaling", "dtype", "data"):
            if getattr(args, flag) is not None:
                raise ValueError(f"--{flag.replace('_', '-')} needs a model (RUN_DIR or hf:PATH)")
        check_analytic(values)
    else:
        from ..instruments.subject import subject_class

        subject_class(args.target).refuse(
            heads=args.heads, head_dim=args.head_dim, seed=args.seed, train_len=args.train_len,
            scheme=values.schemes[0] if values.schemes else None, logn=args.logn, rope_scaling=args.rope_scaling,
            dtype=args.dtype)
        if len(values.schemes) > 1:
            raise ValueError("with a RUN_DIR, --scheme SPEC (once) measures the run under that scheme")
    return measure_and_write(args, get("resolution"), values)


def check_analytic(values: ResolutionOptions) -> None:
    """What the analytic form needs (scheme specs; no --texts) and bounds (heads x head dim, --train-len)."""
    if not values.schemes:
        raise ValueError("give a RUN_DIR (empirical) or at least one --scheme SPEC (analytic)")
    if values.texts is not None:
        raise ValueError("--texts is for the empirical form (lexkit resolution RUN_DIR)")
    heads = 16 if values.heads is None else values.heads
    head_dim = 64 if values.head_dim is None else values.head_dim
    if heads * head_dim > MAX_WIDTH:
        raise ValueError(f"--heads {heads} x --head-dim {head_dim} = {heads * head_dim}: at most {MAX_WIDTH} (memory)")
    checks.number("--train-len", values.train_len, maximum=checks.MAX_TRAIN_LEN)
