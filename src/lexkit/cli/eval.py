"""``lexkit eval``: bits per byte of a trained run, or of a Hugging Face causal LM (``hf:PATH``),
at many lengths and attention patterns.

The paper's protocol by default (every length scores the same bytes: the first max(lengths)
bytes, or tokens, of every document that long); ``--stride S`` for sliding windows. Prints a table
(lengths as columns, one row per pattern) and the loss by position; ``--json``/``--csv``/``--plot``
write the results (atomically, and only once the evaluation has succeeded). Both kinds of model
go through one instrument (:mod:`lexkit.instruments.evaluate`: :func:`lexkit.evaluate.evaluate_run`);
see ``docs/pretrained.md`` for ``hf:PATH``.
"""

from __future__ import annotations

from ..core import options as declared
from ..core import threads
from ..instruments.base import get
from ..instruments.evaluate import EvalOptions
from .instrument import measure_and_write


def add_parser(sub):
    p = sub.add_parser(
        "eval", help="bits per byte of a run at many lengths and patterns", description=__doc__,
    )
    p.add_argument("target", metavar="RUN_DIR", help="a run directory written by `lexkit train`, or hf:PATH "
                   "(a Hugging Face causal LM: a save_pretrained directory or a cached hub name)")
    declared.add_flags(p, EvalOptions)  # every setting, its help and bounds declared once, in EvalOptions
    p.add_argument("--json", metavar="FILE", help="write the full results (JSON)")
    p.add_argument("--csv", metavar="FILE", help="write one row per length and pattern (CSV)")
    p.add_argument("--plot", metavar="FILE.png", help="bpb by length per pattern, and by position")
    p.add_argument("--device", default="auto", metavar="DEVICE", help="auto, cpu, cuda or mps (default: auto)")
    p.add_argument("--threads", type=int, metavar="N", help=threads.HELP)
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    return p


def run(args) -> int:
    # the settings read back (--lengths parsed) and checked as the library checks them, before any work
    values = EvalOptions(**declared.given(args, EvalOptions)).check()
    return measure_and_write(args, get("eval"), values)
