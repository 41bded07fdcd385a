"""Table G, use of context (one folder, one job per module): :mod:`.rows` (its section of
results.json and its cached scores), :mod:`.table` (its settings, rows, configurations and the run),
:mod:`.queries` (its lines pooled over seeds and formats, and its goal), :mod:`.findings` and
:mod:`.report` (section G) and :mod:`.figures`. Its recipe is :mod:`lexkit.study.recipe`."""

from .table import FORMATS, ROWS, Configuration, RetrievalSettings, RetrievalTable, RowSpec, SeedRun

__all__ = ["FORMATS", "ROWS", "Configuration", "RetrievalSettings", "RetrievalTable", "RowSpec", "SeedRun"]
