"""The tables the study runs beside its grid, one folder each (:mod:`.extension`, table E;
:mod:`.retrieval`, table G), every one a :class:`~lexkit.study.plan.StudyTable`: its settings, its run,
its rows in results.json, its queries, its sections of the report and its figures.

:data:`TABLES` lists them in report order. A new table is one folder and one :func:`register`
call: the study runs it (:class:`~lexkit.study.plan.StudyConfig` and ``lexkit study`` take its
settings), caches it and writes its section of results.json, and the report
(:func:`lexkit.study.report.write_report`) and TensorBoard show it.
"""

from ..schema import TABLES
from ..schema import register_table as register
from .extension import ExtensionTable
from .retrieval import RetrievalTable

register(ExtensionTable)
register(RetrievalTable)

__all__ = ["TABLES", "ExtensionTable", "RetrievalTable", "register"]
