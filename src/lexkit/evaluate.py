"""``lexkit.evaluate``: bits per byte at many lengths (:mod:`lexkit.instruments.evaluate`, the instrument)
under the name users import. The module is callable: ``lexkit.evaluate(model, documents, lengths, ...)``
is :func:`evaluate`."""

from .core.api import callable_module
from .instruments.evaluate.measure import (  # noqa: F401 (the instrument's public names)
    BATCH_TOKENS,
    REPORT,
    REPORT_VERSION,
    STARTS,
    check_options,
    check_start,
    check_stream,
    check_stream_value,
    default_lengths,
    evaluate,
    evaluate_run,
    paired_rows,
    parse_lengths,
    position_buckets,
    resolve_patterns,
    score_windows,
    scored_tokens,
    select_documents,
    should_stream,
    stream_nll,
    token_documents,
    windows,
)
from .instruments.evaluate.report import CSV_FIELDS, csv_fields, csv_rows, csv_text  # noqa: F401
from .instruments.evaluate.rows import EvalReport  # noqa: F401 (what evaluate_run returns)

callable_module(__name__, evaluate)
