"""An instrument's command (:mod:`lexkit.instruments.base`): ``lexkit NAME TARGET [its flags] [--json F]
[--csv F] [--plot F.png]`` for every registered instrument without a hand-written command, its flags made
from its ``Options`` (:mod:`lexkit.core.options`); and what every instrument's command does once it has the
options: measure, write the files, print the text (:func:`measure_and_write`). lexkit's own instruments
run through the same loop from their commands (``lexkit inspect``)."""

from __future__ import annotations

import argparse
import sys
import warnings

from ..core import options as declared
from ..core import threads
from ..instruments.base import INSTRUMENTS, Context, Instrument
from ..training.runs import atomic_write, write_json
from . import options


def generic(commands: tuple[str, ...]) -> list[type[Instrument]]:
    """The registered instruments that are a command of their own (``command`` None), in registration
    order; one named as a built-in command is left out with a warning."""
    out = []
    for cls in INSTRUMENTS:
        if cls.command is not None:
            continue
        if cls.name in commands:
            warnings.warn(f"instrument {cls.name!r} has the name of a built-in command: not a command of its own "
                          "(give it another name)", stacklevel=2)
            continue
        out.append(cls)
    return out


def add_parser(sub, cls: type[Instrument]):
    """``lexkit NAME``'s parser: TARGET, the flags of ``cls.Options``, the outputs it offers, the device."""
    p = sub.add_parser(cls.name, help=cls.summary or None, description=cls.description or cls.__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="TARGET", help=cls.targets)
    declared.add_flags(p.add_argument_group(f"{cls.name}'s options"), cls.Options)
    add_outputs(p, cls)
    p.add_argument("--device", default="auto", metavar="DEVICE", help="auto, cpu, cuda or mps (default: auto)")
    p.add_argument("--threads", type=int, metavar="N", help=threads.HELP)
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.set_defaults(run=lambda args: run(args, cls), instrument=True)  # instrument: it computes (threads policy)
    return p


def add_outputs(parser, cls: type[Instrument]) -> None:
    """--json, and --csv / --plot where the instrument writes them."""
    parser.add_argument("--json", metavar="FILE", help="write the report (JSON)")
    if cls.offers("csv"):
        parser.add_argument("--csv", metavar="FILE", help="write the report's rows (CSV)")
    if cls.offers("figures"):
        parser.add_argument("--plot", metavar="FILE.png", help="draw the report's figure")


def run(args, cls: type[Instrument]) -> int:
    """``lexkit NAME``: the options read back and checked under their flags (the Options' own ``check()``
    where it has one, as the library calls it; else each field's bounds), then :func:`measure_and_write`."""
    values = cls.Options(**declared.given(args, cls.Options))
    if callable(getattr(values, "check", None)):
        values.check()
    else:
        declared.check(values)
    return measure_and_write(args, cls(), values)


def measure_and_write(args, instrument: Instrument, values) -> int:
    """The outputs checked before any work, the report measured, the files written (--json: its document,
    --csv, --plot), then the text printed: files first, so a reader that closes the pipe early loses none."""
    options.check_outputs(args)
    device = options.device(args) if hasattr(args, "device") else "cpu"
    plot = getattr(args, "plot", None)
    context = Context(device=device, progress=getattr(args, "progress", True) and sys.stderr.isatty(),
                      figures=plot is not None)
    report = instrument.measure(args.target, values, context)
    if getattr(args, "json", None):
        write_json(args.json, instrument.document(report))
    if getattr(args, "csv", None):
        atomic_write(args.csv, instrument.csv(report))
    if plot:
        instrument.figures(report, plot)
    print(instrument.text(report, values))
    if getattr(args, "json", None) and instrument.names_json:
        print(f"wrote {args.json}")
    if plot:
        print(f"wrote {plot}")
    return 0
