"""The design principles' typed row (:class:`PrinciplesRow`)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ...documents.rows import Row


@dataclasses.dataclass(frozen=True)
class PrinciplesRow(Row):
    """The design principles measured on a trained model (:func:`lexkit.instruments.principles.measure_principles`):
    order variance and translation change (None when no document was long enough)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("offset", "tokens")

    order_variance: float | None
    translation: float | None
    offset: int | None = None
    tokens: int | None = None
