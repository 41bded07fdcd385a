"""Table G's recipe follows the study's preset (a tiny study trains tiny runs, the default study the
measured recipe with its stop rule) unless asked otherwise, and says which it used; its rows, its
methods and its stop rule are settings of the study, checked before anything is written."""

from __future__ import annotations

import pytest

from lexkit.cli import main
from lexkit.study import Study, StudyConfig
from lexkit.study.recipe import RECIPE, RECIPES, for_preset
from toy_corpus import STUDY_DOCS, write_corpus


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("data"), STUDY_DOCS)


def g(data_dir, tmp_path, **settings):
    cfg = StudyConfig(data=str(data_dir), **settings)
    return Study(cfg, tmp_path, progress=False, echo=None).table("retrieval")


@pytest.mark.parametrize("preset, size, steps, stop", [
    ("tiny", "tiny", 40, ""),
    ("quick", "quick", 1000, ""),
    ("small", "quick", 4000, "probe:exact=0.9,probes=5,after=2000"),
    ("medium", "medium", 20000, ""),
])
def test_table_g_follows_the_studys_preset(data_dir, tmp_path, preset, size, steps, stop):
    """A study at each preset trains G's runs with that preset's recipe: its size, steps and stop rule
    (``small``, the default study: the measured recipe at quick size, stopped once it has converged)."""
    table = g(data_dir, tmp_path, preset=preset, schemes=["alibi"])
    cell = table.cells()[0]
    assert (table.recipe().preset, cell.train_cfg.steps, cell.train_cfg.stop) == (size, steps, stop)
    assert cell.train_cfg.batch == RECIPE.batch and cell.train_cfg.mix == RECIPE.mix
    assert cell.model_cfg.train_len == {"tiny": 32, "quick": 64, "medium": 512}[size] and len(table.cells()) == 1
    assert for_preset("small") == RECIPES["small"] and RECIPES["small"].steps == RECIPE.steps and not RECIPE.stop


@pytest.mark.parametrize("preset, given, needles", [("quick", None, 10), ("small", None, 20), ("tiny", None, 20),
                                                     ("quick", 3, 3)])
def test_table_g_scores_the_needles_of_the_studys_preset(data_dir, tmp_path, preset, given, needles):
    """A first look (quick) scores 10 needles per cell, every other study 20, unless asked; the
    cache key, results.json's config and the section say the number scored."""
    more = {} if given is None else {"retrieval_samples": given}
    table = g(data_dir, tmp_path, preset=preset, schemes=["alibi"], **more)
    assert table.samples() == needles and table.plan.cfg.to_json()["retrieval_samples"] == needles
    other = g(data_dir, tmp_path, preset=preset, schemes=["alibi"], retrieval_samples=needles + 1)
    run = table.seed_runs()[0]
    configuration = table.configurations(run)[0]
    assert table.cache_path("k", configuration) != other.cache_path("k", configuration)


def test_the_recipe_asked_for_is_the_recipe_used_and_said(data_dir, tmp_path, capsys, monkeypatch):
    """``--retrieval-preset``, ``--retrieval-steps`` and ``--retrieval-stop`` override the study
    preset's recipe; the dry run and results.json say what ran (the dry run timed by stubs: what it
    plans is read here, its real timing is test_study.py's test_dry_run_lists_cells_and_trains_nothing)."""
    from stub_timer import stub_study_timer

    stub_study_timer(monkeypatch)
    table = g(data_dir, tmp_path, preset="tiny", schemes=["alibi"], retrieval_preset="quick", retrieval_steps=50,
              retrieval_stop="probe:after=20")
    cell = table.cells()[0]
    assert (cell.model_cfg.train_len, cell.train_cfg.steps, cell.train_cfg.stop) == (64, 50,
                                                                                      "probe:exact=0.9,probes=5,after=20")
    assert g(data_dir, tmp_path, schemes=["alibi"], retrieval_stop="off").cells()[0].train_cfg.stop == ""
    config = table.plan.cfg.to_json()
    assert (config["retrieval_preset"], config["retrieval_steps"], config["retrieval_stop"]) == (
        "quick", 50, "probe:exact=0.9,probes=5,after=20")
    argv = ["study", "--preset", "tiny", "--scheme", "alibi", "--data", str(data_dir), "--lengths", "16,32",
            "--out", str(tmp_path / "s"), "--dry-run", "--no-extension", "--retrieval-preset", "tiny",
            "--retrieval-stop", "probe:probes=2"]
    assert main(argv) == 0
    assert ("with --mix induction:0.75 (tiny preset, 40 steps, stopped by probe:exact=0.9,probes=2,after=0, batch 64)"
            in capsys.readouterr().out)


def test_rows_and_methods_of_table_g_are_chosen(data_dir, tmp_path):
    """``retrieval_rows`` keeps the rows named, in the table's order (``all``: every row); a study of its
    own schemes runs every row, the default study rope, alibi and its layouts; the methods are scored
    only when asked (``retrieval_methods=True``, make study-full), else the rope row alone."""
    from lexkit.study import DEFAULT_LAYOUTS, DEFAULT_SCHEMES

    every = g(data_dir, tmp_path, preset="tiny", schemes=["rope", "alibi", "sandwich"], layouts=["hwfa:W=8"])
    assert [r.label for r in every.rows()] == ["rope", "alibi", "sandwich", "hwfa:W=8"]
    some = g(data_dir, tmp_path, preset="tiny", schemes=["rope", "alibi", "sandwich"], layouts=["hwfa:W=8"],
             retrieval_rows=["hwfa:W=8", "alibi"])
    assert [r.label for r in some.rows()] == ["alibi", "hwfa:W=8"]
    default = g(data_dir, tmp_path, preset="tiny")
    assert [r.label for r in default.rows()] == ["rope", "alibi", *DEFAULT_LAYOUTS]
    whole = g(data_dir, tmp_path, preset="tiny", retrieval_rows=["all"])
    assert whole.rows() == whole.every_row() and len(whole.rows()) > len(default.rows())
    assert {r.scheme for r in whole.rows() if r.layout is None} <= set(DEFAULT_SCHEMES)
    rope = every.seed_runs()[0]
    assert [c.label for c in every.configurations(rope)] == ["rope"]  # the methods: only when asked
    methods = g(data_dir, tmp_path, preset="tiny", schemes=["rope"], retrieval_methods=True)
    assert len(methods.configurations(methods.seed_runs()[0])) == 1 + 11 + 3
    assert [u.job for u in every.units()][:2] == ["train", "score"]


@pytest.mark.parametrize("argv, message", [
    (["--retrieval-rows", "xpos"], "--retrieval-rows 'xpos' is not a row of table G in this study; its rows: alibi"),
    (["--retrieval-stop", "probe:exact=7"], "--retrieval-stop: stop rule 'probe:exact=7': parameter exact=7 is "
                                            "out of range (must be in (0, 1])"),
    (["--jobs", "0"], "--jobs must be a positive integer"),
])
def test_bad_table_g_settings_are_one_line_and_write_nothing(tmp_path, data_dir, capsys, argv, message):
    out = tmp_path / "s"
    assert main(["study", "--preset", "tiny", "--scheme", "alibi", "--data", str(data_dir), "--out", str(out),
                 *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert not out.exists()


def test_the_report_says_the_recipe_its_stop_rule_and_what_one_seed_cannot_say():
    """Section G names the stop rule its runs had (results.json's config records it) and, with one
    seed, that its intervals count the needles alone and that intervals over seeds need three."""
    from lexkit.study import read
    from lexkit.study.tables.retrieval.report import blocks
    from study_results import study_results

    res = study_results()
    res["retrieval"]["seeds"] = 1
    res["config"]["retrieval_stop"] = "probe:exact=0.9,probes=5,after=2000"
    text = " ".join(getattr(b, "text", "") for b in blocks(read(res)))
    assert "ended once the trained-format probe had converged (`probe:exact=0.9,probes=5,after=2000`)" in text
    assert "on 1 seed (one seed: its intervals count the needles alone; intervals over seeds need three, " \
           "`make study-full`)" in text
    res["retrieval"]["seeds"] = 3
    del res["config"]["retrieval_stop"]
    text = " ".join(getattr(b, "text", "") for b in blocks(read(res)))
    assert "ended once" not in text and "make study-full" not in text and "on 3 seeds, scored" in text


@pytest.mark.parametrize("preset, given, steps", [("quick", None, 0), ("small", None, 60), ("tiny", None, 60),
                                                  ("quick", 5, 5), ("small", 0, 0)])
def test_table_e_fine_tunes_follow_the_studys_preset(data_dir, tmp_path, preset, given, steps):
    """A first look (quick) has table E's training-free methods alone; 0 steps asks for that at any
    preset; the config records the steps and every other unit is kept."""
    more = {} if given is None else {"extension_steps": given}
    cfg = StudyConfig(data=str(data_dir), preset=preset, schemes=["rope"], layouts=[], retrieval=False, **more)
    table = Study(cfg, tmp_path, progress=False, echo=None).table("extension")
    jobs = [unit.job for unit in table.units()]
    assert table.steps() == steps and cfg.to_json()["extension_steps"] == steps
    assert jobs.count("fine-tune") == (3 if steps else 0) and jobs.count("evaluate") == 12


def test_extension_steps_may_be_zero_but_not_negative(data_dir, tmp_path):
    with pytest.raises(ValueError, match=r"extension_steps must be an integer >= 0 \(at most [0-9,]+\), got -1"):
        StudyConfig(data=str(data_dir), extension_steps=-1)
