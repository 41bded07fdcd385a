"""Resolution's typed rows: :class:`ResolutionRow` (the resolution command's analytic R),
:class:`EmpiricalRow` (measured per layer and head), :class:`AnalyticRow` and :class:`AnalyticCurves`
(the study's analytic R)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ...documents.rows import Row


@dataclasses.dataclass(frozen=True)
class ResolutionRow(Row):
    """One length of an analytic or empirical resolution document (``note``: why R is n/a)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("note",)

    scheme: str | None
    length: int
    pattern: str
    resolution: float | None
    per_head: list | None
    per_layer: list | None
    entropy: float | None
    note: str | None = None


@dataclasses.dataclass(frozen=True)
class EmpiricalRow(Row):
    """Empirical resolution and attention entropy of a trained model at one (length, pattern): the
    means over layers, per layer, and per head of every layer (:func:`lexkit.resolution.empirical`);
    a length it cannot run has ``resolution`` None and a ``note``."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("texts", "per_layer", "per_head", "entropy", "entropy_per_layer",
                                           "entropy_per_head", "note")

    length: int
    pattern: str
    texts: int | None = None
    resolution: float | None = None
    per_layer: list[float] | None = None
    per_head: list[list[float]] | None = None
    entropy: float | None = None
    entropy_per_layer: list[float] | None = None
    entropy_per_head: list[list[float]] | None = None
    note: str | None = None


@dataclasses.dataclass(frozen=True)
class AnalyticRow(Row):
    """The study's analytic R (mean over heads) of one row of its grid (a scheme, or a layout: the mean
    over its layers, each layer's in ``per_layer``) as initialised, at one pattern and length.
    ``label`` is ``"scheme"`` in the JSON."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("per_layer",)
    KEYS: ClassVar[dict[str, str]] = {"label": "scheme"}

    label: str
    pattern: str
    length: int
    resolution: float | None
    per_layer: list[float] | None = None


@dataclasses.dataclass(frozen=True)
class AnalyticCurves(Row):
    """The analytic s[n] - s[0] (mean over heads) of every scheme at ``length``: the curves the
    study report plots."""

    length: int
    pattern: str
    curves: dict[str, list[float]]
