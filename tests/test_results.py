"""results.json as one typed document (lexkit.study.schema.StudyResults): today's version reads and writes back
key for key, every version a study has written reads and renders (fixtures in
tests/fixtures/results_versions, written by the study of the commit each file names), and the
numbers the report shows are the ones stored."""

import dataclasses
import json
from pathlib import Path
from typing import ClassVar

import pytest

import safety_net
from lexkit.documents.render import csv_text, markdown
from lexkit.documents.rows import Row
from lexkit.instruments.resolution.rows import EmpiricalRow
from lexkit.study import document, read, write_report
from lexkit.study.report import length_table
from lexkit.study.report.tables import pattern_table
from lexkit.study.schema import StudyResults, StudyRun
from lexkit.study.tables.extension.rows import ExtensionRow
from lexkit.study.tables.retrieval.rows import RetrievalEntry
from lexkit.study.tensorboard import study_scalars

VERSIONS = Path(__file__).parent / "fixtures" / "results_versions"
#: the study's commit that wrote each fixture, and what its version added
WRITTEN_BY = {
    "schema1.json": "cbc986f: the first study",
    "schema2.json": "c71836f: analytic_curves",
    "schema2-extension.json": "312b98d: table E, model.logn",
    "schema2-provenance.json": "421d219: provenance, evaluation rows' streamed",
    "schema2-retrieval.json": "44377c4: table G (6 of its configurations kept)",
}


def test_todays_results_json_reads_and_writes_back_key_for_key():
    stored = json.loads((safety_net.HERE / "results.json").read_text())
    doc = StudyResults.from_json(stored)
    assert isinstance(doc.runs[0], StudyRun) and isinstance(doc.runs[0].resolution[0], EmpiricalRow)
    assert isinstance(doc.table("extension").rows[0], ExtensionRow)
    assert isinstance(doc.table("retrieval").configs[0], RetrievalEntry)
    assert json.dumps(doc.to_json()) == json.dumps(stored)  # the same keys in the same order, the same values


def test_every_fixture_of_an_old_version_is_a_study_that_wrote_it():
    assert sorted(p.name for p in VERSIONS.iterdir()) == sorted(WRITTEN_BY)


@pytest.mark.parametrize("name", sorted(WRITTEN_BY))
def test_every_version_reads_and_renders(name, tmp_path, request):
    if name == "schema1.json":
        # its figures are built from its numbers by each drawing function (the oldest lacks some), each file
        # written but not laid out or rendered (test_report.py draws each kind)
        request.getfixturevalue("unrendered")
    else:  # the others' as test_report's
        request.getfixturevalue("no_figures")
    stored = json.loads((VERSIONS / name).read_text())
    doc = read(stored)
    assert [run.label for run in doc.runs] == [run["scheme"] for run in stored["runs"]]
    # table A's cells are the stored bpb of each run, rounded (one seed per scheme in these studies)
    header, rows = length_table(doc)
    for row, run in zip(rows, stored["runs"]):
        causal = {x["length"]: x["bpb"] for x in run["eval"]["results"] if x["pattern"] == "causal"}
        assert row[1:] == [f"{causal[n]:.3f}" for n in stored["lengths"]]
    text = markdown(document(doc))
    assert ("## E. Context extension" in text) == ("extension" in stored)
    assert ("## G. Use of context" in text) == ("retrieval" in stored)
    write_report(stored, tmp_path)  # every file, whatever the version holds
    if name == "schema1.json":  # no analytic curves stored: that figure alone is left out
        assert not (tmp_path / "s_curves.png").exists() and (tmp_path / "bpb_by_length.png").is_file()
    assert len((tmp_path / "results.csv").read_text().splitlines()) == 1 + sum(len(r["eval"]["results"])
                                                                               for r in stored["runs"])
    assert set(study_scalars(doc)) >= {f"eval/{run['scheme']}" for run in stored["runs"]}


def test_schema_2s_layout_family_and_table_g_kind_read_as_schema_3s_fields(request):
    """Schema 3 renamed two keys: a layout's cell had ``family`` ``"layout"`` (no family: it is
    ``layered``, ``family`` the one its layers share or None), and table G's entries had ``kind``,
    ``"scheme"`` for a run as trained (scheme or layout), where they have ``origin``, ``"trained"``.
    The one reader (StudyRun.from_json, RetrievalEntry.from_json) reads the old keys as the new
    fields, writes the new ones back, and the report of the old document is the new one's."""
    request.getfixturevalue("no_figures")
    stored = json.loads((VERSIONS / "schema2-retrieval.json").read_text())
    assert stored["schema"] == 2 and "layered" not in stored["runs"][0]
    assert "origin" not in stored["retrieval"]["configs"][0]
    stored["runs"][1]["family"] = "layout"  # as a schema-2 study wrote a layout's cell (its other keys as any cell's)
    doc = read(stored)
    assert [(r.layered, r.family) for r in doc.runs] == [(False, "bias"), (True, None)]
    kinds = [c["kind"] for c in stored["retrieval"]["configs"]]
    origins = [c.origin for c in doc.table("retrieval").configs]
    assert set(kinds) == {"scheme", "method", "fine-tune"}
    assert origins == [{"scheme": "trained"}.get(k, k) for k in kinds]
    written = doc.to_json()
    assert [(r["family"], r["layered"]) for r in written["runs"]] == [("bias", False), (None, True)]
    assert all("kind" not in c and "origin" in c for c in written["retrieval"]["configs"])
    assert read(written) == doc  # the new keys read back as the same document
    assert markdown(document(read(written))) == markdown(document(doc))
    # a layout stays in table B (every layout, whatever its layers' families)
    assert {row[0] for row in pattern_table(doc).rows} == {r["scheme"] for r in stored["runs"]}


@dataclasses.dataclass(frozen=True)
class Sample(Row):
    OPTIONAL: ClassVar[tuple[str, ...]] = ("note",)
    KEYS: ClassVar[dict[str, str]] = {"from_": "from"}

    from_: int
    bytes: int = 0
    size: int | None = None
    note: str | None = None


def test_a_missing_key_reads_as_its_default_and_an_unknown_one_is_ignored():
    assert Sample.from_json({"from": 3, "later": 1}) == Sample(3, 0, None, None)
    assert list(Sample(3).to_json().items()) == [("from", 3), ("bytes", 0), ("size", None)]  # optional None: left out


def test_the_csv_writer_is_one_for_every_file():
    assert csv_text([{"a": 1, "b": None}, {"a": 2.5, "b": "x,y"}]) == 'a,b\n1,\n2.5,"x,y"\n'
    assert csv_text([], ["a", "b"]) == "a,b\n"


def test_table_e_without_fine_tunes_says_so():
    """A study with ``--extension-steps 0`` (a first look's default) reports table E's methods and
    says that nothing was fine-tuned, rather than "fine-tuned for 0 steps"."""
    from lexkit.study.tables.extension.report import blocks

    stored = json.loads((safety_net.HERE / "results.json").read_text())
    stored["extension"]["finetune_steps"] = 0
    stored["extension"]["rows"] = [r for r in stored["extension"]["rows"] if r.get("finetune") is None]
    text = markdown(blocks(StudyResults.from_json(stored)))
    assert "not fine-tuned (`--extension-steps 0`" in text and "fine-tuned for 0 steps" not in text
    assert "PI (linear)" in text and "fine-tuned at" not in text


def test_table_g_names_table_es_methods_only_where_it_scored_them():
    from lexkit.study.tables.retrieval.report import blocks

    stored = json.loads((safety_net.HERE / "results.json").read_text())
    assert "table E's methods (scalings at x16" in markdown(blocks(StudyResults.from_json(stored)))
    stored["retrieval"]["configs"] = [c for c in stored["retrieval"]["configs"] if c["origin"] == "trained"]
    assert "table E's methods" not in markdown(blocks(StudyResults.from_json(stored)))


def test_evaluation_of_a_cell_the_study_does_not_have_names_the_valid_ones():
    """It returned (None, None), as for a cell that could not run."""
    from lexkit.study.results import evaluation, read
    from study_results import study_results

    doc = read(study_results())
    label, pattern, length = doc.runs[0].label, doc.patterns[0], doc.lengths[0]
    assert evaluation(doc, label, pattern, length)[0] is not None
    for args, words in (((label, pattern, 3), "no length 3; its lengths: "),
                        (("nope", pattern, length), "no row 'nope'; its rows: "),
                        ((label, "window:999", length), "no pattern 'window:999'; its patterns: ")):
        with pytest.raises(KeyError, match=words):
            evaluation(doc, *args)
