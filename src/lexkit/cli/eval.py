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

import argparse

from ..attention import KERNELS
from ..core import checks, threads
from ..instruments.base import get
from ..instruments.evaluate import EvalOptions
from ..instruments.evaluate.measure import STARTS
from .instrument import measure_and_write


def add_parser(sub):
    p = sub.add_parser(
        "eval", help="bits per byte of a run at many lengths and patterns", description=__doc__,
    )
    p.add_argument("target", metavar="RUN_DIR", help="a run directory written by `lexkit train`, or hf:PATH "
                   "(a Hugging Face causal LM: a save_pretrained directory or a cached hub name)")
    p.add_argument(
        "--lengths", metavar="L,L,...",
        help="comma-separated lengths in bytes (default: the training length x 1/2, 1, 2, 4, 8, 16)",
    )
    p.add_argument(
        "--pattern", dest="patterns", action="append", metavar="SPEC",
        help="attention pattern (causal, window[:W], bca[:W], chunk[:W], sinks[:W,K=4,pos=text|cache]; "
        "W defaults to the training length); on a model whose layers differ, inside each layer's own, or "
        "SELECTOR=SPEC for the layers a selector names (global=window:4096, local=causal, L0-2=..., an hf: "
        "model's layer types); repeatable (default: causal)",
    )
    p.add_argument(
        "--data", metavar="SPEC",
        help="evaluate on these documents: stdlib (its validation split), a file, directory or glob, "
        "or hf:NAME[:CONFIG[:SPLIT]] (all of their documents); default: the run's own validation split",
    )
    p.add_argument("--stride", type=int, metavar="S",
                   help="sliding windows advancing by S bytes (default: non-overlapping chunks)")
    p.add_argument("--start", choices=STARTS, default=None,
                   help="what a window's first token is: bos (the paper's protocol as lexkit runs it: each "
                   "document's first window opens on its BOS) or text (every window opens on a byte of the "
                   "document, as a training window does; scores bytes 1..M). Default: bos, text with --paired")
    p.add_argument("--paired", action="store_true",
                   help="use of context: each longer length's bpb over the shortest's on the same bytes with the "
                   "start held fixed (--start text), with its 95 %% interval over documents (docs/evaluation.md)")
    p.add_argument("--max-docs", type=int, metavar="N", help="use at most N documents")
    p.add_argument("--max-bytes", type=int, metavar="N",
                   help="score at most about N bytes per length (at least one document)")
    p.add_argument("--batch-size", type=int, metavar="N",
                   help="windows per forward pass (default: by length, 8192 inputs on CPU)")
    p.add_argument("--json", metavar="FILE", help="write the full results (JSON)")
    p.add_argument("--csv", metavar="FILE", help="write one row per length and pattern (CSV)")
    p.add_argument("--device", default="auto", metavar="DEVICE", help="auto, cpu, cuda or mps (default: auto)")
    p.add_argument("--threads", type=int, metavar="N", help=threads.HELP)
    p.add_argument("--kernel", default="auto", choices=KERNELS, help="attention kernel (default: auto)")
    p.add_argument(
        "--scheme", metavar="SPEC",
        help="evaluate the trained weights under another scheme with the same tensors, no retraining "
        "(e.g. rope:scaling=yarn,factor=4, rerope:w=64; original_len and w default to the training length)",
    )
    p.add_argument("--logn", action=argparse.BooleanOptionalAction, default=None,
                   help="log-n attention scaling at evaluation (default: as the run trained)")
    p.add_argument("--add", metavar="[SELECTOR=]MODIFIER",
                   help="score the trained weights with layer modifiers that hold no learned state added, no "
                   "retraining: topk:4 (every layer), global=topk:4, L1=softcap:30;local=adaptive (lexkit layouts "
                   "lists them)")
    p.add_argument(
        "--stream", action=argparse.BooleanOptionalAction, default=None,
        help="feed each window in segments through a KV cache trimmed to the pattern's reach (memory flat in the "
        "length); default: auto, streaming under window/bca past one segment (4096 tokens)",
    )
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.add_argument("--plot", metavar="FILE.png", help="bpb by length per pattern, and by position")
    group = p.add_argument_group("Hugging Face models (hf:PATH; needs pip install -e '.[hf]')")
    add_hf_arguments(group)
    group.add_argument("--max-tokens", type=int, metavar="N", help="score at most about N tokens per length")
    return p


def add_hf_arguments(group) -> None:
    """Flags that only an ``hf:PATH`` model reads (eval and resolution)."""
    group.add_argument("--rope-scaling", metavar="SPEC",
                       help="RoPE scaling through the model's config: TYPE:FACTOR (linear:2, dynamic:2, yarn:4), "
                       "TYPE:key=value,... or a JSON object, on every layer with RoPE; SELECTOR=SPEC for the "
                       "layers a selector names (global=yarn:4)")
    group.add_argument("--dtype", default=None, metavar="DTYPE", help="float32 (default), bfloat16 or float16")


def run(args) -> int:
    from ..core.specs import parse_lengths

    # what only the command line knows is checked here; everything else by the library, before it loads
    lengths = parse_lengths(args.lengths) if args.lengths is not None else None
    checks.lengths("--lengths", lengths or [], checks.MAX_EVAL_LENGTH)
    values = EvalOptions(
        lengths=lengths, patterns=tuple(args.patterns or ["causal"]), data=args.data, stride=args.stride,
        max_docs=args.max_docs, max_bytes=args.max_bytes, max_tokens=args.max_tokens, batch_size=args.batch_size,
        kernel=args.kernel, scheme=args.scheme, logn=args.logn, add=args.add,
        stream="auto" if args.stream is None else args.stream, rope_scaling=args.rope_scaling, dtype=args.dtype,
        start=args.start or ("text" if args.paired else "bos"), paired=args.paired)
    return measure_and_write(args, get("eval"), values)
