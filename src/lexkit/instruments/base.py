"""The instrument seam: what an instrument is to the command line and to a user's code.

An instrument is a class with a ``name``, its settings as a dataclass (``Options``: each field a flag,
its metadata the flag's help and bounds, :mod:`lexkit.core.options`), its report's class (``Report``: a
:class:`~lexkit.documents.report.Report`, a dataclass whose fields are the report's top-level JSON keys,
typed, that reads as their mapping too) and four functions of its report::

    measure(target, options, context) -> Report  the report (lexkit.core.version.header first)
    text(report, options) -> str                  what the terminal shows
    document(report) -> dict                      what --json writes (default: report.to_json())
    csv(report) -> str                            one row per measured thing (or None: no --csv)
    figures(report, path) -> None                 the figure of --plot (or None: no --plot)

``target`` is what the command line names (a run directory or ``hf:PATH``) or a loaded subject
(:func:`lexkit.load`); ``context`` the device and whether to draw a progress bar. Every number the
command writes comes from ``measure`` and is written by ``text``/``csv``: a command parses, calls
and writes (:mod:`lexkit.cli.instrument`), and builds no report of its own.

``register`` adds one to :data:`INSTRUMENTS`; one whose ``command`` is None becomes ``lexkit NAME``,
its flags made from ``Options`` (a module given to ``lexkit --import MODULE`` may register one: the
toy instrument of tests/fixtures/toy_instrument/ is one folder and one ``register``). lexkit's own
instruments name the hand-written command that runs them (``lexkit inspect``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from ..core.registry import Registry
from ..documents.report import Report


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """The settings of an instrument that has none."""


@dataclasses.dataclass(frozen=True)
class Context:
    """Where an instrument measures: ``device`` (cpu, cuda, ...) and whether a progress bar is drawn."""

    device: str = "cpu"
    progress: bool = False
    #: whether the command will draw the figure: a measure may skip what only the figure reads
    figures: bool = False


#: the default context: the CPU, no progress bar
ON_CPU = Context()


class Instrument:
    """One instrument (module docstring). Subclasses set the class attributes and define
    :meth:`measure` and :meth:`text`; :meth:`csv` and :meth:`figures` are optional."""

    #: ``lexkit NAME`` (a registered instrument without a ``command``) and the registry's key
    name: ClassVar[str] = ""
    #: one line for ``lexkit --help``
    summary: ClassVar[str] = ""
    #: the command's ``--help`` text (default: the class docstring)
    description: ClassVar[str] = ""
    #: what TARGET may be, for the command's help
    targets: ClassVar[str] = "a run directory written by `lexkit train`, or hf:PATH"
    #: the settings, a dataclass whose fields are the command's flags (lexkit.core.options)
    Options: ClassVar[type] = NoOptions
    #: what ``measure`` returns: a Report whose fields are the keys of the JSON it writes (lexkit.documents.report)
    Report: ClassVar[type[Report]] = Report
    #: the hand-written command that runs this instrument; None: ``lexkit NAME``, made from Options
    command: ClassVar[str | None] = None
    #: whether the command says "wrote FILE" of its --json after the text (``lexkit resolution`` always has)
    names_json: ClassVar[bool] = False

    def measure(self, target: Any, options: Any, context: Context = ON_CPU) -> Report:
        raise NotImplementedError

    def text(self, report: Report, options: Any) -> str:
        raise NotImplementedError

    def document(self, report: Report) -> dict:
        """What --json writes: the report's JSON (its keys in order; no field of what only the text or figure
        reads, :func:`lexkit.documents.report.aside`)."""
        return report.to_json()

    def csv(self, report: Report) -> str:
        raise NotImplementedError(f"{self.name} writes no CSV")

    def figures(self, report: Report, path: str) -> None:
        raise NotImplementedError(f"{self.name} draws no figure")

    @classmethod
    def offers(cls, output: str) -> bool:
        """Whether the instrument writes ``output`` ("csv" or "figures"): it defines that function."""
        return getattr(cls, output) is not getattr(Instrument, output)


def _check(cls: type) -> None:
    """What :func:`register` refuses: Options not a dataclass, Report not a Report (the command line refuses a
    name a built-in command has, :mod:`lexkit.cli.instrument`)."""
    if not dataclasses.is_dataclass(cls.Options):
        raise TypeError(f"{cls.__name__}.Options must be a dataclass (its fields are the command's flags)")
    if not (isinstance(cls.Report, type) and issubclass(cls.Report, Report)):
        raise TypeError(f"{cls.__name__}.Report must be a lexkit.instruments.base.Report (its fields are the keys "
                        "of the JSON it writes)")


#: every registered instrument, by name
INSTRUMENTS: Registry = Registry("instrument", Instrument, check=_check)
register = INSTRUMENTS.register


def get(name: str) -> Instrument:
    """The registered instrument ``name``, an instance (ValueError listing the valid names)."""
    return INSTRUMENTS.get(name)()
