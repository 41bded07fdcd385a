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
results only once every cell has been scored. The report is the retrieval instrument's
(:mod:`lexkit.instruments.retrieval`, :func:`lexkit.retrieval.retrieval_run`), as ``lexkit eval``'s is;
this module parses and calls it. See
docs/retrieval.md.
"""

from __future__ import annotations

from ..core import options as declared
from ..core import threads
from ..instruments.base import get
from ..instruments.retrieval import RetrievalOptions
from .instrument import measure_and_write


def add_parser(sub):
    p = sub.add_parser("retrieval", help="exact match of needles at distance (copy, passkey, kvthread, ...)",
                       description=__doc__)
    p.add_argument("target", metavar="TARGET", help="a run directory written by `lexkit train`, or hf:PATH")
    declared.add_flags(p, RetrievalOptions)  # every setting, its help and bounds declared once, in RetrievalOptions
    p.add_argument("--json", metavar="FILE", help="write the report (JSON)")
    p.add_argument("--csv", metavar="FILE", help="write one row per cell (CSV)")
    p.add_argument("--plot", metavar="FILE.png", help="needle-in-a-haystack heatmaps and accuracy against length")
    p.add_argument("--device", default="auto", metavar="DEVICE", help="auto, cpu, cuda or mps (default: auto)")
    p.add_argument("--threads", type=int, metavar="N", help=threads.HELP)
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    return p


def run(args) -> int:
    # the settings read back (--lengths, --depths parsed) and checked as the library checks them, before any work
    values = RetrievalOptions(**declared.given(args, RetrievalOptions)).check()
    return measure_and_write(args, get("retrieval"), values)
