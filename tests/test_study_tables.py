"""The tables beside the study's grid behind one interface (lexkit.study.plan.StudyTable): a toy table H,
added as a later table would be (one folder, tests/fixtures/toy_table/, and one register call), is
run, cached, written to results.json and read back typed, shown in the report and in TensorBoard,
and takes its settings as StudyConfig keywords and ``lexkit study`` flags; the settings of tables E
and G keep their keywords and flags; the cache hands back the row type it is given."""

import dataclasses
import json

import pytest

from lexkit.cli import main
from lexkit.documents.render import markdown
from lexkit.study import TABLES, Study, StudyConfig, document, read, register, results, schema
from lexkit.study.cache import Cache
from lexkit.study.tensorboard import study_scalars
from toy_corpus import STUDY_DOCS, write_corpus
from toy_table import ToyTable
from toy_table.rows import ToyRow, ToySection


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("data"), STUDY_DOCS)


@pytest.fixture
def table_h():
    """Table H registered for one test (after E and G), and taken out again."""
    register(ToyTable)
    try:
        yield ToyTable
    finally:
        TABLES.remove(ToyTable)


def config(data_dir, **tables):
    return StudyConfig(preset="tiny", schemes=["alibi"], patterns=["causal"], lengths=[16, 32], steps=4,
                       data=str(data_dir), eval_docs=2, resolution_texts=1, extension=False, retrieval=False, **tables)


def test_a_new_table_is_one_folder_and_one_register_call(tmp_path, data_dir, table_h, no_figures):
    out = tmp_path / "study"
    study = Study(config(data_dir, toy_docs=2), out, progress=False, echo=None)
    assert [t.key for t in study.tables] == ["extension", "retrieval", "toy"]
    done = study.run()
    saved = json.loads((out / "results.json").read_text())
    # its section: a key of its own after the others, read back as its own row type
    keys = list(saved)
    assert keys.index("toy") == keys.index("retrieval") + 1 and keys[keys.index("toy") + 1] == "wall_seconds"
    section = read(saved).table("toy")
    assert isinstance(section, ToySection) and isinstance(section.rows[0], ToyRow) and section == done.table("toy")
    # its number is the study's own protocol: H scored 2 documents at the training length, as the grid did
    assert section.docs == 2 and section.rows[0].bpb == results.evaluation(done, "alibi", "causal", 32)[0]
    assert saved["config"]["toy"] is True and saved["config"]["toy_docs"] == 2  # its settings beside E's and G's
    # the report shows its block (markdown and HTML), TensorBoard its scalars
    report = (out / "report.md").read_text()
    assert "## H. A toy table" in report and f"| alibi | 0 | {section.rows[0].bpb:.3f} |" in report
    assert "H. A toy table" in (out / "report.html").read_text()
    assert study_scalars(saved)["toy/alibi"] == {"bpb/causal": {32: section.rows[0].bpb}}
    # cached: a re-run computes nothing of it
    again = Study(config(data_dir, toy_docs=2), out, progress=False, echo=None)
    assert again.run().table("toy") == section
    assert [r["action"] for r in again.record if r["task"] == "toy"] == ["cached"]
    # off: no section (null in results.json, where every table has its key), no block
    assert Study(config(data_dir, toy=False), out, progress=False, echo=None).table("toy").run() is None
    off = dataclasses.replace(done, tables={**done.tables, "toy": None})
    assert off.to_json()["toy"] is None and "H. A toy table" not in markdown(document(off))


def test_a_new_tables_figures_and_flags_come_with_it(tmp_path, data_dir, table_h, capsys, monkeypatch):
    from lexkit.study.report import figures as plots
    from lexkit.study.report import report_figures

    doc = read({**json.loads((pytest.importorskip("safety_net").HERE / "results.json").read_text()),
                "toy": {"docs": 1, "rows": [{"label": "rope", "seed": 0, "bpb": 6.5}]}})
    assert isinstance(doc.table("toy"), ToySection)
    given = {}
    monkeypatch.setattr(plots, "draw", lambda figures, results, out=None: given.update(figures) or {})
    report_figures(doc)  # what it draws: the grid's, E's, G's and H's, in that order
    assert list(given)[-4:] == ["extension.png", "retrieval_scatter.png", "retrieval_heatmap.png", "toy.png"]
    monkeypatch.undo()
    assert plots.draw({"toy.png": given["toy.png"]}, doc)["toy.png"][:4] == b"\x89PNG"
    # lexkit study takes its settings as flags, checked under their names, and --dry-run lists its tasks
    # (timed by stubs: the estimate's real timing is test_study.py's test_dry_run_lists_cells_and_trains_nothing)
    from stub_timer import stub_study_timer

    stub_study_timer(monkeypatch)
    argv = ["study", "--preset", "tiny", "--scheme", "alibi", "--lengths", "16,32", "--data", str(data_dir),
            "--out", str(tmp_path / "s"), "--no-retrieval", "--no-extension"]
    assert main([*argv, "--toy-docs", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --toy-docs must be a positive integer (at most 50), got 0"
    assert main([*argv, "--toy-docs", "3", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "table toy: 1 tasks" in text and "evaluate  alibi" in text
    assert main([*argv, "--no-toy", "--dry-run"]) == 0 and "table toy: skipped" in capsys.readouterr().out


def test_table_settings_are_study_config_keywords(data_dir):
    """Tables E and G keep StudyConfig's keywords (and results.json's config, key for key); a table's
    settings may also be given whole; a keyword no table has is refused, as for any constructor."""
    cfg = StudyConfig(data=str(data_dir), extension=False, extension_steps=7, retrieval_seeds=1,
                      retrieval_preset="tiny")
    e, g = cfg.tables["extension"], cfg.tables["retrieval"]
    assert (e.on, e.steps, g.on, g.seeds, g.preset, g.samples) == (False, 7, True, 1, "tiny", None)
    config_json = cfg.to_json()
    assert list(config_json)[-8:] == ["extension", "extension_steps", "retrieval", "retrieval_steps",
                                      "retrieval_preset", "retrieval_samples", "retrieval_seeds", "retrieval_methods"]
    assert config_json["retrieval_methods"] is False  # recorded: a results.json without it scored the methods
    assert config_json["extension_steps"] == 7 and config_json["retrieval_seeds"] == 1
    assert config_json["retrieval_samples"] == 20  # the table's choice at the study's preset, recorded
    # as the study runs them: G's recipe of the preset asked (tiny: 40 steps, no stop rule, recorded only
    # when set, as every setting added since; the default study's stop rule is recorded)
    assert (config_json["retrieval_preset"], config_json["retrieval_steps"]) == ("tiny", 40)
    assert "retrieval_stop" not in config_json and "retrieval_rows" not in config_json
    small = StudyConfig(data=str(data_dir)).to_json()
    assert (small["retrieval_preset"], small["retrieval_steps"], small["retrieval_seeds"]) == ("quick", 4000, 1)
    assert small["retrieval_stop"] == "probe:exact=0.9,probes=5,after=2000"
    assert StudyConfig(data=str(data_dir), retrieval_rows=["alibi"]).to_json()["retrieval_rows"] == ["alibi"]
    whole = StudyConfig(data=str(data_dir), tables={"retrieval": type(g)(seeds=1, preset="tiny")},
                        extension=False, extension_steps=7)
    assert whole == cfg
    with pytest.raises(TypeError, match="retrieval_sedes"):
        StudyConfig(data=str(data_dir), retrieval_sedes=1)
    with pytest.raises(ValueError, match="retrieval_seeds must be a positive integer"):
        StudyConfig(data=str(data_dir), retrieval_seeds=0)
    with pytest.raises(ValueError, match="retrieval_preset must be one of"):
        StudyConfig(data=str(data_dir), retrieval_preset="huge")


def test_the_cache_hands_back_the_row_type_it_is_given(tmp_path, data_dir):
    """Rows computed are handed back as they are; a document computed (an instrument's JSON) is
    stored whole and handed back as the row type; read back, the same rows."""
    cache = Cache(tmp_path, Study(config(data_dir), tmp_path, progress=False, echo=None).plan,
                  __import__("lexkit.training.distributed").training.distributed.SINGLE, progress=False)
    row = ToyRow("rope", 0, 1.5)
    assert cache.cached("toy", "a", tmp_path / "a.json", lambda: row, ToyRow) is row
    assert cache.cached("toy", "a", tmp_path / "a.json", lambda: pytest.fail("computed again"), ToyRow) == row
    got = cache.cached("toy", "b", tmp_path / "b.json", lambda: {"label": "x", "seed": 1, "bpb": 2.0, "more": 1},
                       ToyRow)
    assert got == ToyRow("x", 1, 2.0) and json.loads((tmp_path / "b.json").read_text())["more"] == 1
    listed = cache.cached("toy", "c", tmp_path / "c.json", lambda: [row, row], ToyRow)
    assert listed == [row, row] and cache.cached("toy", "c", tmp_path / "c.json", list, ToyRow) == [row, row]
    assert [r["action"] for r in cache.record] == ["ran", "cached", "ran", "ran", "cached"]


def test_a_section_of_a_table_not_registered_is_kept_as_it_is():
    """A results.json with a table this lexkit does not have (or has not registered yet) reads, keeps
    that section as its JSON, writes it back in place, and types it once the table is registered."""
    stored = {"schema": 2, "lexkit": "0", "torch": "0", "config": {}, "train_len": 16, "lengths": [16],
              "patterns": ["causal"], "resolution_lengths": [16], "data": {}, "model": {}, "params": 1, "train": {},
              "runs": [], "analytic": [], "toy": {"docs": 1, "rows": [{"label": "a", "seed": 0, "bpb": 1.0}]},
              "wall_seconds": 1.0, "work": {"ran": 0, "cached": 0}}
    doc = schema.StudyResults.from_json(stored)
    assert doc.tables["toy"] == stored["toy"] and doc.to_json() == stored and list(doc.to_json()) == list(stored)
    register(ToyTable)
    try:
        assert doc.table("toy") == ToySection(1, [ToyRow("a", 0, 1.0)])
        assert schema.StudyResults.from_json(stored).tables["toy"] == doc.table("toy")
    finally:
        TABLES.remove(ToyTable)
    with pytest.raises(ValueError, match="registered already"):
        register(TABLES[0])
