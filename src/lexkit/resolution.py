"""``lexkit.resolution``: attention resolution R, the instrument's measure (:mod:`lexkit.instruments.resolution`)
under the name users import. The module is callable: ``lexkit.resolution(target, lengths)`` is
:func:`measure` (a scheme spec: analytic; a run directory, ``hf:PATH`` or a subject: empirical)."""

from .core.api import callable_module
from .instruments.resolution.measure import (  # noqa: F401 (the instrument's public names)
    BLOCK,
    REPORT,
    REPORT_VERSION,
    Accumulator,
    analytic,
    analytic_curve,
    analytic_rows,
    diagonal_sums,
    empirical,
    empirical_run,
    entropy,
    header,
    layer_groups,
    make_scheme,
    measure,
    model_curve,
    resolution,
    resolution_lengths,
    texts,
    to_json,
    visible_counts,
)

callable_module(__name__, measure)
