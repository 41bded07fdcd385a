"""A sweep (``lexkit sweep CONFIG.json --out DIR``): a study of table G alone, its rows the arms of a
configuration file, each on several seeds, trained and scored as table G trains and scores its rows
(through the study's cache and over its workers), besides on the tasks ``kvthread`` and
``ordinal``; one table and one figure, re-rendered from the cache without retraining.
:mod:`.config` (the file), :mod:`.work` (the :class:`Sweep`), :mod:`.report` (its table and figure).
docs/hunt.md has the format and the hunt it serves."""

from .config import Arm, SweepConfig, SweepConfigError, load, parse
from .report import SweepResults, arm_lines
from .work import Sweep, SweepTable

__all__ = ["Arm", "Sweep", "SweepConfig", "SweepConfigError", "SweepResults", "SweepTable", "arm_lines", "load",
           "parse"]
