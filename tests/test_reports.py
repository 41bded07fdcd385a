"""Typed reports (lexkit.documents.report): every instrument's measure returns its declared ``Report``, whose
keys are the keys of the JSON its command writes, in order, each a typed field with a one-line doc; the report
reads as that mapping (attribute and key access agree), a document reads back into an equal report, and an
unknown key is refused naming the valid ones."""

from __future__ import annotations

import dataclasses
import json

import pytest

import lexkit
import lexkit.retrieval
from lexkit.documents.report import Report, key
from lexkit.instruments import IDENTITY, IdentityReport, base
from lexkit.instruments.evaluate import EvalOptions
from lexkit.instruments.evaluate.rows import EvalReport
from lexkit.instruments.inspect.bytes import BytesOptions
from lexkit.instruments.inspect.needle_mass import NeedleMassOptions
from lexkit.instruments.resolution import ResolutionOptions
from lexkit.instruments.resolution.rows import ResolutionReport
from lexkit.instruments.retrieval import RetrievalOptions

#: (instrument, its options on a tiny run: a few cheap cells)
CHEAP = {
    "eval": EvalOptions(lengths=[16], max_docs=1, paired=False),
    "retrieval": RetrievalOptions(task="copy", lengths=[64], depths=(50.0,), samples=1, size=4),
    "inspect.needle_mass": NeedleMassOptions(lengths=[64], depths=(50.0,), samples=1, size=4),
    "inspect.bytes": BytesOptions(top=2, steps=2),
    "resolution": ResolutionOptions(lengths=[16], texts=1),
}


@pytest.fixture(scope="module")
def measured(trained):
    """Each instrument's report of the tiny alibi run (and resolution's analytic one), measured once."""
    import lexkit.cli.inspect  # noqa: F401 (registers lexkit inspect's two instruments)

    out = {name: base.get(name).measure(str(trained / "alibi"), options) for name, options in CHEAP.items()}
    out["resolution analytic"] = base.get("resolution").measure(None, ResolutionOptions(schemes=("rope", "alibi"),
                                                                                        lengths=[32]))
    return out


def _instrument(name: str) -> base.Instrument:
    return base.get(name.split()[0])


@pytest.mark.parametrize("name", [*CHEAP, "resolution analytic"])
def test_a_report_is_its_instruments_report_and_its_keys_are_the_json_written(measured, name):
    report, instrument = measured[name], _instrument(name)
    assert type(report) is instrument.Report and instrument.Report is not Report
    written = json.loads(json.dumps(instrument.document(report)))  # what --json writes, read back
    assert list(written) == list(report) == list(report.keys())  # the same keys, in the same order
    assert set(report) <= set(instrument.Report.key_names())
    required = {f.name for f in dataclasses.fields(instrument.Report) if f.default is dataclasses.MISSING}
    assert required <= set(report)
    for name_ in report:  # attribute and key access agree, as does every mapping reader
        assert getattr(report, name_) == report[name_] == report.get(name_) and name_ in report
    assert dict(report) == dict(report.items()) == {**report} and len(report) == len(written)
    assert report == written and written == report  # equal to its document, as a dict would be


@pytest.mark.parametrize("name", [*CHEAP, "resolution analytic"])
def test_a_document_reads_back_into_an_equal_report(measured, name):
    report, instrument = measured[name], _instrument(name)
    doc = json.loads(json.dumps(instrument.document(report)))
    back = instrument.Report.from_json(doc)
    assert type(back) is instrument.Report and back == report
    assert json.dumps(back.to_json()) == json.dumps(doc)  # byte for byte, key order included


def test_an_unknown_key_is_refused_naming_it_and_the_valid_keys(measured):
    doc = measured["eval"].to_json()
    with pytest.raises(ValueError, match=r"EvalReport: unknown key 'nope' \(valid keys: report, report_version, "
                                         r"lexkit_version, label, scheme, .*, by_position, paired\)"):
        EvalReport.from_json({**doc, "nope": 1})
    with pytest.raises(ValueError, match="EvalReport: the document has no 'results'"):
        EvalReport.from_json({k: v for k, v in doc.items() if k != "results"})


def test_an_optional_key_left_out_is_no_key_and_reads_none(measured):
    report = measured["eval"]  # a run without --paired: no "paired"; its "stride" is null, and a key
    assert "paired" not in report and report.paired is None and report.get("paired", 0) == 0
    assert "stride" in report and report.stride is None and report.to_json()["stride"] is None
    with pytest.raises(KeyError):
        report["paired"]
    doc = report.to_json()
    assert EvalReport.from_json(doc).paired is None and "paired" not in EvalReport.from_json(doc)


def test_every_instruments_report_declares_each_key_typed_with_a_one_line_doc(measured):
    for cls in base.INSTRUMENTS:
        assert issubclass(cls.Report, Report) and cls.Report is not Report, cls.name
        for field in dataclasses.fields(cls.Report):
            doc = field.metadata.get("doc", "")
            assert doc and "\n" not in doc and field.type, f"{cls.Report.__name__}.{field.name}"
    assert IDENTITY == ("label", "scheme", "trained_scheme", "layout", "trained_layout", "selectors")
    assert all(name in IdentityReport.key_names() for name in IDENTITY)


def test_resolutions_view_is_no_key_and_the_public_verbs_return_reports(measured):
    report = measured["resolution analytic"]
    assert report.view["lengths"] == [32] and "view" not in report and "view" not in report.to_json()
    assert report.source == "analytic" and report.scheme == ["rope", "alibi"]
    assert isinstance(lexkit.resolution("rope", [32]), ResolutionReport)
    assert isinstance(measured["eval"], lexkit.evaluate.EvalReport)
    assert isinstance(measured["retrieval"], lexkit.retrieval.RetrievalReport)


def test_a_report_takes_keywords_only_and_register_refuses_a_report_that_is_not_one():
    @dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
    class Small(Report):
        a: int = key("a number")

    with pytest.raises(TypeError, match="takes its keys as keywords"):
        Small("r", 1, "v", 2)
    small = Small(a=2, report="r", report_version=1, lexkit_version="v")  # the keywords' order is the JSON's
    assert list(small) == ["a", "report", "report_version", "lexkit_version"] and small.a == small["a"] == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        small.a = 3

    class Bad(base.Instrument):
        name, Report = "bad-report", dict

    with pytest.raises(TypeError, match="Report must be a lexkit.instruments.base.Report"):
        base.register(Bad)
