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

import argparse

from ..attention import KERNELS
from ..core import threads
from ..instruments.base import get
from ..instruments.retrieval import RetrievalOptions
from ..instruments.retrieval.measure import DEFAULT_DEPTHS
from .instrument import measure_and_write
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
    # what only the command line knows is checked here; everything else by the library, before it loads
    values = needle_values(args, DEFAULTS)
    values = RetrievalOptions(**{**values, "depths": tuple(values["depths"]), "patterns": tuple(values["patterns"])},
                              data=args.data, scheme=args.scheme, logn=args.logn, add=args.add,
                              rope_scaling=args.rope_scaling, cache=args.cache, kernel=args.kernel)
    return measure_and_write(args, get("retrieval"), values)
