"""The ``lexkit`` command: thin argument parsing over the library.

Each sub-command lives in its own module under ``lexkit.cli`` with ``add_parser(sub)`` and
``run(args) -> int``. Errors a user can cause print one ``error: ...`` line and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import LexkitError

COMMANDS = ("schemes", "patterns", "train", "eval", "sample", "resolution", "study")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's usage errors: one line, exit 2
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def import_modules(modules: list[str] | None) -> None:
    """``--import MODULE``: load user modules that register schemes or patterns."""
    for name in modules or []:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise LexkitError(f"--import {name}: cannot import it ({exc})") from exc


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--import", dest="imports", action="append", metavar="MODULE", default=[],
        help="import MODULE first (it may register schemes or patterns); repeatable",
    )


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = _Parser(prog="lexkit", description="Length extrapolation of Transformers, measured.")
    parser.add_argument("--version", action="version", version=f"lexkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        try:
            module = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue  # a command not built yet
        sub_parser = module.add_parser(sub)
        add_common(sub_parser)
        sub_parser.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        import_modules(args.imports)
        return int(args.run(args) or 0)
    except (LexkitError, ValueError, FileNotFoundError, NotADirectoryError) as exc:
        from ..distributed import error_line

        line = error_line(exc)  # under torchrun, rank 0 alone prints
        if line:
            print(line, file=sys.stderr)
        return 2
    except BrokenPipeError:  # `lexkit eval ... | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    sys.exit(main())
