"""The ``lexkit`` command: thin argument parsing over the library.

Each sub-command lives in its own module under ``lexkit.cli`` with ``add_parser(sub)`` and
``run(args) -> int``. Errors a user can cause print one ``error: ...`` line and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

from ..core.errors import LexkitError

COMMANDS = ("schemes", "patterns", "layouts", "tasks", "presets", "train", "runs", "eval", "sample", "resolution",
            "retrieval", "inspect", "study", "sweep", "conformance")
#: the commands that compute with torch: their CPU threads follow lexkit.core.threads' policy
COMPUTING = ("train", "eval", "sample", "resolution", "retrieval", "inspect", "study", "sweep", "conformance")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's usage errors: one line, exit 2
        self.exit(2, f"error: {printable(message)} (see `{self.prog} --help`)\n")


def import_modules(modules: list[str] | None) -> None:
    """``--import MODULE``: load user modules that register schemes, patterns or tasks, found as
    ``python -m`` finds them: the working directory first, then ``sys.path`` (a console script's
    own ``sys.path`` lacks the working directory). Any failure (missing, a syntax error, an
    exception while it runs) is one line naming the module. (A module that replaces a built-in
    scheme or pattern, ``register(cls, replace=True)``, gets the registry's warning, printed as
    one ``warning:`` line.)"""
    import os

    if modules and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    for name in modules or []:
        try:
            importlib.import_module(name)
        except SyntaxError as exc:
            where = f"{exc.filename}, line {exc.lineno}" if exc.filename else "its source"
            raise LexkitError(f"--import {name}: syntax error in {where} ({exc.msg})") from exc
        except Exception as exc:  # the user's module may raise anything while it runs
            raise LexkitError(f"--import {name}: cannot import it ({type(exc).__name__}: {_first_line(exc)})") from exc
        except SystemExit as exc:
            raise LexkitError(f"--import {name}: the module called exit({exc.code})") from exc


def _first_line(exc: BaseException) -> str:
    return printable((str(exc).strip().splitlines() or [repr(exc)])[0])


def printable(text: str) -> str:
    """``text`` on one line: control characters and undecodable bytes (from a user's argument or
    file name) shown as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    """One ``warning:`` line: a message of several lines (torch's) joined by spaces, not shown as ``\\n``."""
    text = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    print(f"warning: {printable(text)}", file=sys.stderr if file is None else file)


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--import", dest="imports", action="append", metavar="MODULE", default=[],
        help="import MODULE first (it may register schemes, patterns or retrieval tasks); repeatable",
    )


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command's, or with ``only`` (a name in :data:`COMMANDS`) that
    command's alone (what :func:`main` parses a command line naming it with: the same arguments and
    errors, without building the other commands' parsers)."""
    from ..core.version import __version__

    parser = _Parser(prog="lexkit", description="Length extrapolation of Transformers, measured.")
    parser.add_argument("--version", action="version", version=f"lexkit {__version__}")
    parser.add_argument("--import", dest="early_imports", action="append", metavar="MODULE", default=[],
                        help="import MODULE first, before or after the command's name alike; repeatable")
    parser.add_argument("--threads", dest="early_threads", type=int, metavar="N",
                        help="the command's --threads, given before its name (`lexkit --threads 1 eval ...`)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS if only is None else [only]:
        module = importlib.import_module(f".{name}", __name__)
        sub_parser = module.add_parser(sub)
        add_common(sub_parser)
        sub_parser.set_defaults(run=module.run)
    if only is None:  # the registered instruments that are commands of their own (lexkit.instruments.base)
        from . import instrument

        for cls in instrument.generic(COMMANDS):
            add_common(instrument.add_parser(sub, cls))
    return parser


def _imports_in(argv: list[str]) -> list[str]:
    """The modules ``--import`` names anywhere on the command line (imported before the parser is built:
    one may register an instrument, which is a command)."""
    out = []
    for i, word in enumerate(argv):
        if word == "--import" and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif word.startswith("--import="):
            out.append(word.split("=", 1)[1])
    return out


def _command_of(argv: list[str]) -> str | None:
    """The command a command line names, when it is one of :data:`COMMANDS` and nothing before it
    asks for the whole parser (``--help``, ``--version``, an unknown option); else None."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in ("--import", "--threads"):
            i += 2
        elif word.startswith(("--import=", "--threads=")):
            i += 1
        else:
            return word if word in COMMANDS else None
    return None


def _early_threads(args: argparse.Namespace) -> None:
    """``lexkit --threads N COMMAND``: the command's own ``--threads`` (given after its name, it wins)."""
    early = getattr(args, "early_threads", None)
    if early is None:
        return
    if not hasattr(args, "threads"):
        takes = ", ".join(COMPUTING)
        raise LexkitError(f"--threads {early}: lexkit {args.command or '(no command)'} takes no --threads "
                          f"(these do: {takes})")
    if args.threads is None:
        args.threads = early


def main(argv: list[str] | None = None) -> int:
    from ..core import threads

    # other processes' CPU time while the commands import (lexkit.core.threads), where the environment
    # does not fix the thread count (reading every process's /proc/PID/stat costs a few ms)
    probe = threads.Probe() if threads.probe_needed(os.environ) else None
    words = sys.argv[1:] if argv is None else list(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = _warning_line  # restored on exit: one `warning: ...` line each
        try:
            import_modules(_imports_in(words))
            args = build_parser(_command_of(words)).parse_args(words)
            import_modules([*args.early_imports, *args.imports])  # also --imp MODULE, which only argparse reads
            _early_threads(args)
            if args.command in COMPUTING or getattr(args, "instrument", False):
                threads.apply(getattr(args, "threads", None), probe)
            return int(args.run(args) or 0)
        except (LexkitError, ValueError, FileNotFoundError, NotADirectoryError) as exc:
            from ..training.distributed import reports

            if reports(exc):  # under torchrun, rank 0 alone prints (a rank's own failure: that rank)
                print(f"error: {_first_line(exc)}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # `lexkit eval ... | head` (outputs are written before printing)
            _quiet_stdout()
            return 0
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            return 130
        except (OSError, OverflowError, MemoryError) as exc:  # a filesystem or size limit no check foresaw
            name = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
            print(printable(f"error: {name}{getattr(exc, 'strerror', None) or _first_line(exc) or type(exc).__name__}"),
                  file=sys.stderr)
            return 2


def _quiet_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush is silent."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # pragma: no cover - stdout replaced (tests)
        pass


def entry() -> None:
    sys.exit(main())
