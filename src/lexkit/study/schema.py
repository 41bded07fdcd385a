"""The schema of a study's results.json: the typed document (:class:`StudyResults`, every version a study
has written; :data:`SCHEMA` is the one it writes), its grid's cells (:class:`StudyRun`) and the registry
of the tables beside the grid (:data:`TABLES`), whose sections the document reads typed. The row types
of the instruments' measures come from :mod:`lexkit.documents.rows`."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from ..documents.rows import Row, typed
from ..instruments.evaluate.rows import Evaluation
from ..instruments.principles.rows import PrinciplesRow
from ..instruments.resolution.rows import AnalyticCurves, AnalyticRow, EmpiricalRow


@dataclasses.dataclass(frozen=True)
class StudyRun(Row):
    """One trained cell of a study's grid (a row of the grid, by its ``label``: a scheme spec or a
    layout as given, ``"scheme"`` in the JSON; and a seed) and everything measured on it. ``layered``:
    whether it is a layout (a scheme, a pattern and modifiers per layer); ``family``: its scheme's
    family (``rotary``, ``bias``, ...), for a layout the one its every layer's scheme shares (None
    where they differ); ``relative``: whether its scores depend on positions only through m - n
    (a layout's: every layer's). Schema 2 and before wrote no ``layered`` and a layout's family as
    ``"layout"``: :meth:`from_json` reads that as ``layered`` with no family."""

    KEYS: ClassVar[dict[str, str]] = {"label": "scheme"}
    NESTED: ClassVar[dict[str, type[Row]]] = {"eval": Evaluation, "resolution": EmpiricalRow,
                                              "principles": PrinciplesRow}

    label: str
    seed: int
    run: str  # the run directory, relative to the study's
    family: str | None
    layered: bool
    relative: bool
    final_loss: float | None
    val_bpb: float | None
    train_seconds: float | None
    eval: Evaluation
    resolution: list[EmpiricalRow]
    principles: PrinciplesRow

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StudyRun:
        """The cell of any schema's JSON (schema 2 and before: ``family`` ``"layout"`` for a layout)."""
        if "layered" not in data:
            layered = data.get("family") == "layout"
            data = {**data, "layered": layered, **({"family": None} if layered else {})}
        return super().from_json(data)


#: the tables beside the grid, in report order (:func:`register_table`; ``import lexkit.study``
#: registers tables E and G): each a :class:`lexkit.study.plan.StudyTable`, of which results.json's
#: readers take its ``key``, ``row`` (the row type of its section), ``Settings``, ``blocks``,
#: ``figures`` and ``scalars``
TABLES: list[Any] = []


def register_table(table: Any) -> Any:
    """Add ``table`` to :data:`TABLES`, after the others: its section of results.json reads as its
    ``row``, and the study's configuration, report and TensorBoard export take it in. Returns it."""
    if any(t.key == table.key for t in TABLES):
        raise ValueError(f"a table {table.key!r} is registered already")
    TABLES.append(table)
    return table


def table_row(key: str) -> type[Row] | None:
    """The row type of the section ``key`` of results.json (None: no table of that key is registered)."""
    return next((t.row for t in TABLES if t.key == key), None)


@dataclasses.dataclass(frozen=True)
class StudyResults(Row):
    """A study's results.json (:mod:`lexkit.study`): settings, every cell's measures, the analytic
    measures, each table beside the grid (``tables``: key -> its section, None when the table did
    not run; in the JSON each is a key of its own where tables E and G always stood), time and
    provenance. Every version is read (schema 1 has no ``analytic_curves``; the tables and
    ``provenance`` came later; schema 3 renamed two keys, each read in its old form by its row's
    ``from_json``: a cell's ``family`` ``"layout"``, :meth:`StudyRun.from_json`, and table G's ``kind``,
    :meth:`lexkit.study.tables.retrieval.rows.RetrievalEntry.from_json`); a study writes the current one,
    :data:`SCHEMA`. A section whose
    table is not registered stays its JSON (:meth:`table` reads it once the table is)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("analytic_curves", "provenance", "invocations")
    NESTED: ClassVar[dict[str, type[Row]]] = {"runs": StudyRun, "analytic": AnalyticRow,
                                              "analytic_curves": AnalyticCurves}

    schema: int
    lexkit: str
    torch: str
    config: dict
    train_len: int
    lengths: list[int]
    patterns: list[str]
    resolution_lengths: list[int]
    data: dict
    model: dict
    params: int
    train: dict
    runs: list[StudyRun]
    analytic: list[AnalyticRow]
    analytic_curves: AnalyticCurves | None = None
    tables: dict[str, Any] = dataclasses.field(default_factory=dict)
    wall_seconds: float | None = None  # this invocation's, from the command to results.json
    work: dict | None = None
    provenance: dict | None = None
    #: every invocation of this configuration in the study's directory, this one last: its ``finished``,
    #: ``wall_seconds`` and the tasks it ``ran`` and read ``cached`` (a cached re-run keeps the runs that did
    #: the work beside its own 0.6 s: :func:`lexkit.study.execution.invocations`)
    invocations: list[dict] | None = None

    def computing(self) -> tuple[float, int] | None:
        """The wall seconds of the invocations that ran tasks (the study's own cost: a cached
        re-run's 0.6 s is not among them) and how many there were; None without :attr:`invocations`."""
        if not self.invocations:
            return None
        working = [e for e in self.invocations if e.get("ran") and isinstance(e.get("wall_seconds"), (int, float))]
        return sum(e["wall_seconds"] for e in working), len(working)

    def to_json(self) -> dict[str, Any]:
        out = {}
        for key, value in super().to_json().items():
            if key == "tables":
                out.update(value)  # each table's section a key of its own, in place
            else:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StudyResults:
        """The document; every key that is no field is a table's section (typed when registered)."""
        fields = {field.name for field in dataclasses.fields(cls)} - {"tables"}
        tables = {key: typed(row, value) if (row := table_row(key)) else value
                  for key, value in data.items() if key not in fields}
        return dataclasses.replace(super().from_json(data), tables=tables)

    def table(self, key: str) -> Any:
        """The section of the table ``key`` (None when it did not run or the study had none)."""
        value, row = self.tables.get(key), table_row(key)
        return row.from_json(value) if isinstance(value, dict) and row is not None else value


#: the version of results.json a study writes (2: ``analytic_curves`` stored; 3: a cell's ``layered`` beside
#: its ``family``, no longer ``"layout"``, and table G's entries' ``origin``, ``"trained"``, ``"method"`` or
#: ``"fine-tune"``, where they had ``kind``, ``"scheme"`` for a row as trained; every older version reads)
SCHEMA = 3
