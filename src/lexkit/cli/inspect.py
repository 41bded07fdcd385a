"""``lexkit inspect TARGET``: instruments that tell retrieval failures apart (docs/inspect.md).

The byte table, of a run directory::

    lexkit inspect RUN [--top 10] [--all] [--steps N] [--data PATH] [--json F] [--csv F] [--plot F.png]

per byte value (and BOS): its count in the run's training corpus, the times training showed it
(the run's batches replayed from its seed, a --mix's task documents included), its embedding row
norm and its cosine to the mean row of the bytes training never showed (with an untied head, the
output rows too); the summary names the most collapsed seen bytes.

The needle mass, of a run or hf:PATH::

    lexkit inspect TARGET --needle-mass --task copy --format hex --lengths 64,256,1024 [--pattern causal]

per layer and length: the attention of the query that predicts the answer's first token, its mass
on the needle (head mean and best head), its entropy against ln(keys), and where the best head's
top key lies (on the needle, or how far from it): dilution or a wrong match. The two are
instruments (:mod:`lexkit.instruments.inspect`); this module parses and calls them.
"""

from __future__ import annotations

import argparse
import dataclasses

from ..core import options as declared
from ..core import threads
from ..instruments.base import get
from ..instruments.inspect.bytes import BytesOptions
from ..instruments.inspect.needle_mass import NeedleMassOptions
from .instrument import measure_and_write

#: the byte table's flags (its Options' fields that have one): flag -> its argparse dest
BYTES_ONLY = {declared.flag_name(f.name): f.name for f in dataclasses.fields(BytesOptions)
              if f.metadata.get("flag", True)}


def add_parser(sub):
    p = sub.add_parser("inspect", help="the byte table (counts, embedding norms, collapse) or the needle mass",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="TARGET", help="a run directory written by `lexkit train` (hf:PATH: "
                   "--needle-mass only)")
    p.add_argument("--needle-mass", action="store_true",
                   help="measure the attention at the answer on retrieval documents instead of the byte table")
    declared.add_flags(p.add_argument_group("the byte table"), BytesOptions)
    declared.add_flags(p.add_argument_group("--needle-mass"), NeedleMassOptions, unset=True)  # None: not given
    p.add_argument("--data", metavar="SPEC",
                   help="byte table: the run's corpus at a new place; --needle-mass: the haystack's corpus "
                   "(default: the run's own)")
    p.add_argument("--add", metavar="[SELECTOR=]MODIFIER",
                   help="--needle-mass: measure the trained weights with stateless layer modifiers added, no "
                   "retraining (global=topk:4; as lexkit eval)")
    p.add_argument("--json", metavar="FILE", help="write the report (JSON)")
    p.add_argument("--csv", metavar="FILE", help="write one row per byte / per (pattern, length, layer) (CSV)")
    p.add_argument("--plot", metavar="FILE.png", help="byte table: cosine and norm against count; --needle-mass: "
                   "mass and entropy against length per layer")
    p.add_argument("--device", default="auto", metavar="DEVICE", help="auto, cpu, cuda or mps (default: auto)")
    p.add_argument("--threads", type=int, metavar="N", help=threads.HELP)
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    return p


def run(args) -> int:
    bytes_given = [flag for flag, dest in BYTES_ONLY.items() if getattr(args, dest) not in (None, False)]
    needle = declared.given(args, NeedleMassOptions, unset=True)  # the needle flags, None where left out
    needle_given = [declared.flag_of(f) for f in declared.flagged(NeedleMassOptions) if needle[f.name] is not None]
    wrong = bytes_given if args.needle_mass else needle_given
    if wrong:
        raise ValueError(f"{wrong[0]} is for " + ("the byte table (without --needle-mass)" if args.needle_mass
                                                  else "--needle-mass"))
    if args.needle_mass:
        values = NeedleMassOptions(**{k: v for k, v in needle.items() if v is not None}, data=args.data,
                                   add=args.add)  # checked by the instrument's measure, as the library is
        return measure_and_write(args, get("inspect.needle_mass"), values)
    if args.add is not None:
        raise ValueError("--add applies to --needle-mass (the byte table reads the embedding, which no "
                         "modifier changes)")
    if str(args.target).startswith("hf:"):
        raise ValueError(f"{args.target}: the byte table is of a lexkit run (an hf: model's tokens are not "
                         "bytes); give --needle-mass to measure its attention")
    values = BytesOptions(**declared.given(args, BytesOptions))
    declared.check(values, declared.flag_name)
    return measure_and_write(args, get("inspect.bytes"), values)
