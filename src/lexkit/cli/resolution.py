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
from ..core import options as declared
from ..instruments.base import get
from ..instruments.resolution import ResolutionOptions
from .instrument import measure_and_write


def add_parser(sub):
    p = sub.add_parser(
        "resolution",
        help="attention resolution R: analytic from --scheme, or empirical from a RUN_DIR",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", nargs="?", metavar="RUN_DIR",
                   help="a training run (empirical form), or hf:PATH (a Hugging Face causal LM: both forms)")
    declared.add_flags(p, ResolutionOptions)  # every setting, its help and bounds declared once, in ResolutionOptions
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--plot", metavar="FILE.png", help="write a figure (s[n] by distance, R by length)")
    return p


def run(args) -> int:
    # outputs and settings are checked before any work (--lengths parsed and bounded as the library bounds them)
    if args.json is not None:
        checks.writable("--json", args.json)
    if args.plot is not None:
        args.plot = checks.png_path("--plot", args.plot)
    values = ResolutionOptions(**declared.given(args, ResolutionOptions)).check()
    if args.target is None:
        for flag in ("rope_scaling", "dtype", "data"):
            if getattr(args, flag) is not None:
                raise ValueError(f"--{flag.replace('_', '-')} needs a model (RUN_DIR or hf:PATH)")
        values.check_analytic()
    else:
        from ..instruments.subject import subject_class

        subject_class(args.target).refuse(
            heads=values.heads, head_dim=values.head_dim, seed=values.seed, train_len=values.train_len,
            scheme=values.schemes[0] if values.schemes else None, logn=values.logn, rope_scaling=values.rope_scaling,
            dtype=values.dtype)
        if len(values.schemes) > 1:
            raise ValueError("with a RUN_DIR, --scheme SPEC (once) measures the run under that scheme")
    return measure_and_write(args, get("resolution"), values)
