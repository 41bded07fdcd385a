"""``lexkit.resolution``: attention resolution R, the instrument's measure (:mod:`lexkit.instruments.resolution`)
under the name users import. The module is callable: ``lexkit.resolution(target, lengths)`` is
:func:`measure` (a scheme spec: analytic; a run directory, ``hf:PATH`` or a subject: empirical)."""

from .core.api import callable_module
from .instruments.resolution.accumulator import Accumulator, diagonal_sums  # noqa: F401 (the instrument's public names)
from .instruments.resolution.analytic import analytic, analytic_rows, layer_groups  # noqa: F401
from .instruments.resolution.curves import BLOCK, analytic_curve, make_scheme, model_curve, visible_counts  # noqa: F401
from .instruments.resolution.document import REPORT, REPORT_VERSION, header, to_json  # noqa: F401
from .instruments.resolution.empirical import empirical, empirical_run, resolution_lengths, texts  # noqa: F401
from .instruments.resolution.formula import entropy, resolution  # noqa: F401
from .instruments.resolution.measure import measure
from .instruments.resolution.rows import ResolutionReport  # noqa: F401 (what measure returns)

callable_module(__name__, measure)
