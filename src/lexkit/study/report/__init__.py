"""The study report: results.json (:mod:`lexkit.study.results`) as one document of blocks, rendered as
markdown and as self-contained HTML, with its figures and CSV. One job per module: :mod:`.tables`
(the grid's tables, and the cells every table is made of), :mod:`.sections` (the grid's sections,
the document in order with each table's part, and the files written). Each table beside the grid
brings its own sections and figures (:mod:`lexkit.study.tables`, registered in
:data:`lexkit.study.schema.TABLES`). ``lexkit.study.report`` hands on their names."""

from .sections import Part, document, grid_sections, listed, report_figures, write_report
from .tables import (
    cell,
    length_table,
    paper_tables,
    pattern_table,
    percent,
    principles_table,
    provenance_table,
    resolution_table,
)

__all__ = ["Part", "cell", "document", "grid_sections", "length_table", "listed", "paper_tables", "pattern_table",
           "percent", "principles_table", "provenance_table", "report_figures", "resolution_table", "write_report"]
