"""Resolution's typed rows: :class:`ResolutionRow` (the resolution command's analytic R),
:class:`EmpiricalRow` (measured per layer and head), :class:`AnalyticRow` and :class:`AnalyticCurves`
(the study's analytic R); and its report, :class:`ResolutionReport` (every form's document's top level,
:mod:`lexkit.documents.report`)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from ...documents.report import aside, key
from ...documents.rows import Row
from .. import IdentityReport
from .document import to_json


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


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class ResolutionReport(IdentityReport):
    """Attention resolution's report in each of its forms (``source``): analytic R of scheme specs or of a
    model's own positions, empirical R of a run, or both of a model with positions of its own (``model``:
    its two documents). ``lexkit.resolution(...)`` returns one (an empirical one's rows with their tensors,
    ``curve`` and ``count``, which :meth:`to_json` leaves out), the instrument one whose ``view`` holds
    what its text and figure read besides."""

    source: str = key("the form: analytic, empirical or model")
    scheme: str | list[str] | None = key("the scheme spec measured (analytic of several: their list), or the one "
                                         "that ran on every layer", optional=True)
    run: str | None = key("the run directory or hf:PATH measured (null: a model given in memory)", optional=True)
    data: str | None = key("empirical: the text's data spec", optional=True)
    train_len: int | None = key("the training length (analytic: the one the scheme assumes)", optional=True)
    layers: int | None = key("empirical: the model's layers", optional=True)
    heads: int | None = key("heads per layer", optional=True)
    head_dim: int | None = key("the head dimension", optional=True)
    seed: int | None = key("analytic of schemes: the seed of learnable initial values", optional=True)
    pattern: str | None = key("the attention pattern measured, its canonical spec", optional=True)
    logn: bool | None = key("whether log-n attention scaling ran", optional=True)
    results: list[dict] | None = key("one row per length (and scheme, or group of layers): R, per head, per "
                                     "layer, the entropy; a note where n/a", optional=True)
    analytic: dict | None = key("model: the analytic document of its own positions", optional=True)
    empirical: dict | None = key("model: the empirical document, where its score hook ran", optional=True)
    per_type: dict | None = key("model: the mean empirical R per layer type, per length (where layers differ)",
                                optional=True)
    view: dict | None = aside("what the text and the figure read besides the document: its rows with their "
                              "curves, the lengths, a model's layer types")

    def to_json(self) -> dict[str, Any]:
        """The JSON document: every key in order, without the rows' tensors."""
        return to_json(super().to_json())
