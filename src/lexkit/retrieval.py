"""``lexkit.retrieval``: retrieval at distance (:mod:`lexkit.instruments.retrieval`, the instrument) under
the name users import: its measure's names, and the CSV of a report."""

from .core.stats import Z95, wilson  # noqa: F401 (the interval of every retrieval accuracy)
from .instruments.retrieval.cells import score, summary  # noqa: F401 (the instrument's public names)
from .instruments.retrieval.context import context_rows, use_of_context  # noqa: F401
from .instruments.retrieval.grid import (  # noqa: F401
    DEFAULT_DEPTHS,
    DEFAULT_MULTIPLES,
    cell_documents,
    check_grid,
    minimum_length,
    needle_lengths,
    read_tokens,
    style,
    unique,
    unit,
)
from .instruments.retrieval.measure import REPORT, REPORT_VERSION, report, retrieval_run  # noqa: F401
from .instruments.retrieval.report import csv_text  # noqa: F401
from .instruments.retrieval.rows import RetrievalReport  # noqa: F401 (what retrieval_run and report return)
from .instruments.retrieval.scoring import (  # noqa: F401
    BATCH_BYTES,
    LOGIT_BYTES,
    SCORE_BYTES,
    SCORE_COPIES,
    UNKNOWN_VOCAB,
    answer_bits,
    answer_scores,
    answer_tokens,
    exact_match,
    other_candidates,
    rows_per_batch,
)
