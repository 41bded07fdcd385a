"""Table E, context extension (one folder, one job per module): :mod:`.configurations` (the
methods and fine-tunes, as data), :mod:`.finetune` (the one rule of a fine-tune, table G's too),
:mod:`.rows` (its section of results.json), :mod:`.table` (its settings and the run),
:mod:`.queries` (its lines and section F's goal), :mod:`.report` (sections E and F) and
:mod:`.figures`."""

from .configurations import Finetune, Method, finetunes, methods
from .table import ExtensionSettings, ExtensionTable

__all__ = ["ExtensionSettings", "ExtensionTable", "Finetune", "Method", "finetunes", "methods"]
