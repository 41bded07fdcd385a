"""The needle options of the commands that score retrieval documents (``lexkit retrieval`` and
``lexkit inspect --needle-mass``): declared once, each command giving its own defaults, and read
back checked, with those defaults filled in. Every flag is declared with ``default=None`` so that a
command can tell a flag given from one left out (``inspect`` refuses needle flags without
``--needle-mass``); :func:`needle_values` puts the defaults in."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..core import checks
from ..tasks import needles

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
    group.add_argument("--format", metavar="NAME",
                       help=f"the needle format of --task copy: trained ({', '.join(needles.trained())}; default "
                       f"tilde) or held out ({', '.join(needles.held_out_formats())}); `lexkit tasks` lists them")
    group.add_argument("--lengths", metavar="L,L,...",
                       help="document lengths in the model's unit: bytes for a lexkit run, tokens for hf: (default: "
                       "the training length x 1, 2, 4, 8, 16, those long enough for the needle)")
    group.add_argument("--depths", metavar="D,D,...", help=f"needle depths in percent, 0..100 (default: {depths})")
    group.add_argument("--samples", type=int, metavar="N",
                       help=f"documents per length and depth (default: {defaults.samples})")
    group.add_argument("--size", type=int, metavar="N",
                       help="letters of a copy segment / digits of a key / symbols of a kvthread hash or an ordinal "
                       "value (default: the task's, `lexkit tasks`)")
    group.add_argument("--seed", type=int, metavar="S", help=f"which documents (default: {defaults.seed})")
    group.add_argument("--pattern", dest="patterns", action="append", metavar="SPEC",
                       help="attention pattern (causal, window[:W], bca[:W], sinks[:W,K=4]); repeatable "
                       f"(default: {', '.join(defaults.patterns)})")


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


def parse_depths(text: str) -> list[float]:
    """``"0,50,100"`` -> ``[0.0, 50.0, 100.0]`` (the range is checked where the documents are made)."""
    values = []
    for item in (item.strip() for item in text.split(",")):
        try:
            values.append(float(item))
        except ValueError:
            raise ValueError(f"--depths: {item!r} is not a number (give percents such as 0,50,100)") from None
    return values
