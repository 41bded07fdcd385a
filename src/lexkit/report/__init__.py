"""The study report: results.json (:mod:`lexkit.results`) as one document of blocks, rendered as
markdown and as self-contained HTML, with its figures and CSV. One job per module: :mod:`.tables`
(every table), :mod:`.findings` (every sentence computed from the numbers), :mod:`.sections` (the
sections in order, and the files written). ``lexkit.report`` hands on their names."""

from .findings import context_goal_finding, extension_findings, goal_finding, retrieval_findings
from .sections import document, extension_sections, grid_sections, retrieval_sections, write_report
from .tables import (
    answer_bits_table,
    extension_table,
    length_table,
    paper_tables,
    pattern_table,
    principles_table,
    provenance_table,
    resolution_table,
    retrieval_table,
)

__all__ = ["answer_bits_table", "context_goal_finding", "document", "extension_findings", "extension_sections",
           "extension_table", "goal_finding", "grid_sections", "length_table", "paper_tables", "pattern_table",
           "principles_table", "provenance_table", "resolution_table", "retrieval_findings", "retrieval_sections",
           "retrieval_table", "write_report"]
