"""The needle options of ``lexkit inspect --needle-mass``: the needle flags of ``lexkit retrieval``
(:class:`lexkit.instruments.retrieval.RetrievalOptions`' fields, whose help they share where it names no
default) with inspect's own defaults, read back checked, with those defaults filled in. Every flag is
declared with ``default=None`` so that a command can tell a flag given from one left out (``inspect``
refuses needle flags without ``--needle-mass``); :func:`needle_values` puts the defaults in."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..attention import pattern_help
from ..core import checks
from ..instruments.retrieval import RetrievalOptions, parse_depths  # noqa: F401 (parse_depths: its name here)

#: flag -> the attribute it is stored in
FLAGS = {"--task": "task", "--format": "format", "--lengths": "lengths", "--depths": "depths",
         "--samples": "samples", "--size": "size", "--seed": "seed", "--pattern": "patterns"}


@dataclasses.dataclass(frozen=True)
class NeedleDefaults:
    """What a command scores when a needle flag is left out."""

    task: str
    depths: Sequence[float]
    samples: int
    seed: int = 0
    patterns: Sequence[str] = ("causal",)


def add_needle_options(group, defaults: NeedleDefaults, *, task_help: str = "") -> None:
    """Declare the needle flags on ``group`` (a parser or an argument group), their help naming
    ``defaults``; ``task_help``: what the command adds about --task."""
    depths = ",".join(f"{d:g}" for d in defaults.depths)
    group.add_argument("--task", metavar="SPEC",
                       help=f"a retrieval task of `lexkit tasks`, its parameters after a colon{task_help} "
                       f"(default: {defaults.task})")
    group.add_argument("--format", metavar="NAME", help=shared_help("format"))
    group.add_argument("--lengths", metavar="L,L,...", help=shared_help("lengths"))
    group.add_argument("--depths", metavar="D,D,...", help=f"needle depths in percent, 0..100 (default: {depths})")
    group.add_argument("--samples", type=int, metavar="N",
                       help=f"documents per length and depth (default: {defaults.samples})")
    group.add_argument("--size", type=int, metavar="N", help=shared_help("size"))
    group.add_argument("--seed", type=int, metavar="S", help=f"which documents (default: {defaults.seed})")
    group.add_argument("--pattern", dest="patterns", action="append", metavar="SPEC",
                       help=pattern_help(default=", ".join(defaults.patterns), repeatable=True, selectors=True))


def shared_help(name: str) -> str:
    """The help of retrieval's needle flag ``name`` (one whose text names no command's default)."""
    text = next(f for f in dataclasses.fields(RetrievalOptions) if f.name == name).metadata["help"]
    return text() if callable(text) else text


def given(args, flags: dict[str, str] = FLAGS) -> list[str]:
    """The flags of ``flags`` (flag -> its argparse dest; default the needle flags) given on the
    command line, in their order."""
    return [flag for flag, dest in flags.items() if getattr(args, dest, None) is not None]


def needle_values(args, defaults: NeedleDefaults) -> dict:
    """The needle flags as keywords of the scoring functions (task, lengths, depths, samples, size, seed,
    patterns, format), each checked (a ValueError naming the flag) and the left-out ones at ``defaults``."""
    from ..core.specs import parse_lengths

    depths = parse_depths(args.depths) if args.depths is not None else list(defaults.depths)
    lengths = parse_lengths(args.lengths) if args.lengths is not None else None
    checks.lengths("--lengths", lengths or [], checks.MAX_EVAL_LENGTH)
    checks.number("--samples", args.samples)
    checks.number("--size", args.size)
    checks.number("--seed", args.seed, strict=False)
    return {"task": args.task or defaults.task, "lengths": lengths, "depths": depths,
            "samples": defaults.samples if args.samples is None else args.samples, "size": args.size,
            "seed": defaults.seed if args.seed is None else args.seed,
            "patterns": args.patterns or list(defaults.patterns), "format": args.format}

