"""A tiny study end to end: its report agrees with results.json, a re-run does nothing (from the
study's own record), an interrupted study resumes (killed inside a table E fine-tune too, to the
same table E), a new scheme trains only that scheme, and the dry run plans what it would train."""

import dataclasses
import json

import pytest

from lexkit import tasks
from lexkit.cli import main
from lexkit.core import lock
from lexkit.study import Study, StudyConfig, read
from lexkit.study.recipe import RECIPE
from lexkit.study.report import length_table, pattern_table
from lexkit.study.tables.extension import finetune, finetunes, methods
from lexkit.study.tables.extension.report import extension_table
from lexkit.study.tables.extension.rows import section
from lexkit.study.tables.retrieval import table as table_g
from lexkit.study.tables.retrieval.report import retrieval_table
from lexkit.study.tables.retrieval.table import Configuration, RowSpec
from lexkit.tasks import needles
from lexkit.training import runs
from lexkit.training.loop import train
from stub_timer import StubTimer, stub_study_timer
from toy_corpus import STUDY_DOCS as DOCS
from toy_corpus import write_corpus


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("data"), DOCS)


def config(data_dir, schemes=("alibi", "rope"), extension=False, retrieval=False, seeds=1, **more):
    return StudyConfig(preset="tiny", schemes=list(schemes), patterns=["causal", "window"], lengths=[16, 32, 64],
                       steps=2, data=str(data_dir), eval_docs=2, resolution_texts=1, extension=extension,
                       extension_steps=3, retrieval=retrieval, retrieval_preset="tiny", retrieval_steps=2,
                       retrieval_samples=1, retrieval_seeds=seeds, **more)


def actions(study, task=None):
    return [(r["task"], r["action"]) for r in study.record if task is None or r["task"] == task]


def test_tiny_study_end_to_end(tmp_path, data_dir, request, unrendered):
    out = tmp_path / "study"
    first = Study(config(data_dir, extension=True), out, progress=False, echo=None)
    results = first.run()
    assert {a for _, a in actions(first)} == {"ran"}
    # every file of the report, each figure built from this study's numbers (laid out: test_report.py's)
    for name in ("report.md", "results.json", "results.csv", "bpb_by_length.png", "s_curves.png",
                 "resolution_per_layer.png", "entropy.png", "loss_by_position.png"):
        assert (out / name).is_file(), name
    saved = json.loads((out / "results.json").read_text())
    assert saved["schema"] == 3 and [r["scheme"] for r in saved["runs"]] == ["alibi", "rope"]
    assert saved["retrieval"] is None and not (out / "retrieval_scatter.png").exists()  # retrieval=False: no table G
    assert saved["patterns"] == ["causal", "window:32"] and saved["lengths"] == [16, 32, 64]

    # the analytic curves the report plots are stored, not recomputed by the report: ALiBi's is
    # s[n] - s[0] = -n * (mean slope), slopes 2^(-8h/H) for the study's H heads
    heads = saved["model"]["n_heads"]
    stored = saved["analytic_curves"]
    assert stored["length"] == min(4 * saved["train_len"], 64) and set(stored["curves"]) == {"alibi", "rope"}
    mean_slope = sum(2.0 ** (-8.0 * h / heads) for h in range(1, heads + 1)) / heads
    assert stored["curves"]["alibi"] == pytest.approx([-n * mean_slope for n in range(stored["length"])], abs=1e-5)

    # Table A in the report holds exactly the bpb of results.json, rounded
    report = (out / "report.md").read_text()
    header, rows = length_table(read(saved))
    for row in rows:
        run = next(r for r in saved["runs"] if r["scheme"] == row[0])
        for n, cell in zip(saved["lengths"], row[1:]):
            value = next(x["bpb"] for x in run["eval"]["results"] if x["pattern"] == "causal" and x["length"] == n)
            assert cell == f"{value:.3f}"
        assert "| " + " | ".join(row) + " |" in report
    _, rows_b = pattern_table(read(saved))
    assert {(r[0], r[1]) for r in rows_b} == {(s, p) for s in ("alibi", "rope") for p in ("causal", "window:32")}
    csv_lines = (out / "results.csv").read_text().strip().splitlines()
    assert len(csv_lines) == 1 + 2 * 2 * 3  # header + schemes x patterns x lengths
    check_extension(saved, out, report)

    # a re-run retrains and re-evaluates nothing (its report is the same: the figures checked above
    # are not drawn again here)
    request.getfixturevalue("no_figures")
    again = Study(config(data_dir, extension=True), out, progress=False, echo=None)
    assert again.run().runs == results.runs
    assert {a for _, a in actions(again)} == {"cached"}
    # ... and keeps the invocation that did the work beside its own (its wall_seconds was overwritten: 770.5 -> 0.6)
    kept = json.loads((out / "results.json").read_text())
    assert [e["wall_seconds"] for e in kept["invocations"]] == [saved["wall_seconds"], kept["wall_seconds"]]
    assert [e["ran"] > 0 for e in kept["invocations"]] == [True, False]
    assert read(kept).computing() == (saved["wall_seconds"], 1)
    wall = next(line for line in (out / "report.md").read_text().splitlines() if line.startswith("| wall time"))
    assert f"computing it took {saved['wall_seconds']:.0f} s over 1 invocation that ran tasks" in wall

    # adding a scheme trains only that scheme
    more = Study(config(data_dir, ("alibi", "rope", "none"), extension=True), out, progress=False, echo=None)
    more.run()
    ran = [r["name"] for r in more.record if r["action"] == "ran"]
    assert ran and all(name.startswith("none-") for name in ran)


def check_extension(saved, out, report):
    """Section E holds every method and fine-tune of table E's configurations on the rope run, as stored;
    the fine-tunes start from the rope run's weights; F's goal is the minimum over every cell."""
    t, far = saved["train_len"], max(saved["lengths"])
    ext = saved["extension"]
    assert ext["factor"] == far / t and ext["finetune_len"] == 4 * t
    labels = [m.label for m in methods(t, far)] + [f.label for f in finetunes(t)]
    assert list(dict.fromkeys(r["label"] for r in ext["rows"])) == labels
    assert len(ext["rows"]) == len(methods(t, far)) + 3 * 3  # each fine-tune under causal, window, bca
    rope_run = next(r["run"] for r in saved["runs"] if r["scheme"] == "rope")
    for row in ext["rows"]:
        if row["finetune"]:
            config = json.loads((out / row["finetune"]["run"] / "config.json").read_text())
            assert config["init"]["run"].endswith(rope_run) and config["model"]["train_len"] == 4 * t
            assert config["train"]["steps"] == 3
    header, rows = extension_table(read(saved))
    for row in rows[: len(ext["rows"])]:
        stored = next(r for r in ext["rows"] if r["label"] == row[0] and row[1].startswith(r["pattern"]))
        for n, cell in zip(saved["lengths"], row[2:]):
            assert cell == f"{next(x['bpb'] for x in stored['results'] if x['length'] == n):.3f}"
        assert "| " + " | ".join(row) + " |" in report
    # the goal, computed here independently from the stored numbers
    cells = [(x["bpb"], x["length"], run["scheme"]) for run in saved["runs"] for x in run["eval"]["results"]]
    cells += [(x["bpb"], x["length"], r["label"]) for r in ext["rows"] for x in r["results"]]
    best_far = min(b for b, n, _ in cells if n == far and b is not None)
    best_one = min(b for b, n, name in cells if n == t and b is not None and name in ("alibi", "rope"))
    assert f"is **{best_far:.3f}**" in report
    assert f"**{100 * (best_one - best_far) / best_one:.1f} %** below" in report
    assert "## E. Context extension" in report and (out / "extension.png").is_file()


def test_interrupted_study_resumes(tmp_path, data_dir, monkeypatch, no_figures):
    out = tmp_path / "study"
    study = Study(config(data_dir), out, progress=False, echo=None)
    real = Study.empirical
    calls = {"n": 0}

    def interrupted(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:  # during the second scheme
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Study, "empirical", interrupted)
    with pytest.raises(KeyboardInterrupt):
        study.run()
    monkeypatch.setattr(Study, "empirical", real)
    resumed = Study(config(data_dir), out, progress=False, echo=None)
    resumed.run()
    ran = [(r["task"], r["name"].split("-")[0]) for r in resumed.record if r["action"] == "ran"]
    assert ran == [("resolution", "rope"), ("principles", "rope")]  # only the unfinished tasks


def test_a_study_directory_has_one_writer(tmp_path, data_dir, no_figures):
    """While another process holds the study directory, a study refuses it and writes nothing;
    the lock is released when the study ends."""
    out = tmp_path / "study"
    with lock.hold(out):
        with pytest.raises(lock.LockedError, match="is being written by process"):
            Study(config(data_dir, ("alibi",)), out, progress=False, echo=None).run()
        assert sorted(p.name for p in out.iterdir()) == [lock.LOCK]
    Study(config(data_dir, ("alibi",)), out, progress=False, echo=None).run()
    assert not lock.is_locked(out) and not (out / lock.LOCK).exists()


def test_dry_run_lists_cells_and_trains_nothing(tmp_path, data_dir, capsys, monkeypatch):
    out = tmp_path / "study"
    argv = ["study", "--preset", "tiny", "--scheme", "alibi", "--scheme", "xpos:gamma=0.5", "--data", str(data_dir),
            "--lengths", "16,32", "--out", str(out), "--dry-run"]
    # timed for real, table G left out (its timing, half a second here, is test_estimate.py's and
    # test_cli_details.py's; what it plans is read below, timed by stubs)
    assert main([*argv, "--no-retrieval"]) == 0
    text = capsys.readouterr().out
    assert "2 training runs" in text and "xpos_gamma_0.5-s0-" in text and "estimated total" in text
    assert "to train" in text and "left" not in text
    assert not (out / "runs").exists()
    # a run killed at step 12 of 40 (its checkpoint at 10) counts the 30 steps it has left, and says so
    from lexkit.training import runs
    from lexkit.training.loop import train
    from stop import stop_at

    study = Study(StudyConfig(preset="tiny", schemes=["alibi", "xpos:gamma=0.5"], lengths=[16, 32],
                              data=str(data_dir)), out, progress=False, echo=None)
    cell = study.plan.cells()[0]
    stop_at(monkeypatch, 12)
    with pytest.raises(KeyboardInterrupt):
        train(study.cache.run_dir(cell), cell.model_cfg, dataclasses.replace(cell.train_cfg, save_every=5),
              progress=False, corpus=study.plan.corpus)
    monkeypatch.undo()
    assert runs.trainer_state(study.cache.run_dir(cell))["step"] == 10
    # what is left is counted by the same estimate, timed by stubs this time (timed for real above)
    stub_study_timer(monkeypatch)
    assert main(argv) == 0
    again = capsys.readouterr().out
    line = next(x for x in again.splitlines() if x.strip().startswith(cell.name))
    assert "10/40 steps" in line and "min left: what is already trained and cached here is reused" in again
    # table G trains alibi with the tiny study's recipe, on one seed (xpos:gamma=0.5 is not one of its rows)
    assert (f"table G (use of context): 1 run (1 seed a row) with --mix {RECIPE.mix} (tiny preset, "
            "40 steps, batch 64)") in again
    (g_line,) = [x for x in again.splitlines() if "G train     alibi + mix, seed 0" in x]
    assert "to train" in g_line and "left" not in g_line
    estimated = study.estimate(timer=StubTimer(step=1.0, other=0.0))  # a step 1 s, nothing else: left = 30 steps
    unit = next(u for u in estimated["units"] if u["name"] == f"cell {cell.name}")
    assert (unit["seconds"], unit["left"], unit["done_steps"]) == (40.0, 30.0, 10)


def test_no_retrieval_reaches_the_study_and_its_plan(tmp_path, data_dir, capsys, monkeypatch):
    seen, real = {}, Study.estimate

    def estimate(self, jobs=None, timer=None):
        g = self.cfg.tables["retrieval"]
        seen.update(retrieval=g.on, steps=g.steps)
        return real(self, jobs, StubTimer())

    monkeypatch.setattr(Study, "estimate", estimate)
    argv = ["study", "--preset", "tiny", "--scheme", "alibi", "--data", str(data_dir), "--out", str(tmp_path / "s"),
            "--dry-run"]
    assert main(argv + ["--retrieval-steps", "7"]) == 0
    text = capsys.readouterr().out
    assert seen == {"retrieval": True, "steps": 7} and "G train     alibi + mix, seed 0" in text
    assert "(tiny preset, 7 steps, batch 64)" in text
    assert main(argv + ["--no-retrieval"]) == 0
    assert seen["retrieval"] is False and "table G (use of context): skipped" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--scheme", "nope"], "unknown position scheme 'nope'"),
    (["--pattern", "bca:3"], "bca"),
    (["--lengths", "0,32"], "lengths must be positive integers"),
    (["--seeds", "0"], "--seeds must be a positive integer"),
    (["--retrieval-steps", "0"], "--retrieval-steps must be a positive integer"),
    (["--retrieval-seeds", "0"], "--retrieval-seeds must be a positive integer"),
])
def test_study_bad_input(tmp_path, capsys, argv, message):
    assert main(["study", "--preset", "tiny", "--out", str(tmp_path / "s"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]
    assert not (tmp_path / "s").exists()


# -- table G: use of context ---------------------------------------------------------------------------
def test_table_g_plan_runs_configurations_and_cache_keys(tmp_path, data_dir, monkeypatch):
    """Without training: each row of table G on every seed, named apart from the main runs and
    trained with the one recipe; on the rope row's seed 0 (with table E) its methods but plain rope
    and its fine-tunes; a row with a layout, settings, steps and patterns of its own; a needle size
    every format fits; a cache key that follows what is scored."""
    study = Study(config(data_dir, ("alibi", "rope", "xpos:gamma=0.5"), extension=True, retrieval=True, seeds=2,
                         retrieval_methods=True),
                  tmp_path, progress=False, echo=None)
    g = study.table("retrieval")
    assert [table.key for table in study.tables] == ["extension", "retrieval"]  # E and G, behind one interface
    jobs = g.seed_runs()
    assert [(j.row.label, j.cell.seed) for j in jobs] == [("rope", 0), ("rope", 1), ("alibi", 0), ("alibi", 1)]
    cells = g.cells()
    assert all(c.name.startswith("mix-") for c in cells) and len({c.key for c in cells}) == 4
    assert all(c.train_cfg.mix == RECIPE.mix == "induction:0.75" and c.train_cfg.batch == RECIPE.batch
               and c.train_cfg.lr == RECIPE.lr and c.train_cfg.steps == 2 for c in cells)
    assert {c.key for c in cells}.isdisjoint({c.key for c in study.plan.cells()})
    t = g.train_len()
    rope = g.configurations(jobs[0])
    assert rope[0] == Configuration("rope", "trained", None, None, ("causal", f"window:{t}"))
    assert [c.label for c in rope[1:]] == ([m.label for m in methods(t, 16 * t)][1:] + [f.label for f in finetunes(t)])
    assert g.configurations(jobs[1]) == [rope[0]]  # the methods on seed 0 only
    assert g.configurations(jobs[2]) == [Configuration("alibi", "trained", None, None, ("causal", f"window:{t}"))]
    # the needle size: 12 lowered until every format fits the training length (python is the longest)
    assert g.size() == 6 and max(needles.get(f).minimum(6) for f in table_g.FORMATS) <= t
    assert needles.get("python").minimum(7) > t
    path = g.cache_path(cells[0].key, rope[0])
    assert path.parent == tmp_path / "cache" and path.name.startswith("retrieval-")
    study.cfg.tables["retrieval"].samples = 2
    assert g.cache_path(cells[0].key, rope[0]) != path
    # new documents (a task's builder, a format's, or how its seeds are drawn) are never served old
    # scores or runs
    main_keys = [c.key for c in study.plan.cells()]
    path = g.cache_path(cells[0].key, rope[0])
    monkeypatch.setattr(needles.get("caret"), "version", 2)  # held out: scores change, runs do not
    assert g.cache_path(cells[0].key, rope[0]) != path and [c.key for c in g.cells()] == [c.key for c in cells]
    monkeypatch.setattr(needles.get("bare"), "version", 2)  # trained: the runs' mix changes too
    assert [c.key for c in g.cells()] != [c.key for c in cells]
    changed = [c.key for c in g.cells()]
    monkeypatch.setattr(tasks.get("induction"), "version", 2)  # the mix task's own builder
    assert [c.key for c in g.cells()] != changed
    assert [c.key for c in study.plan.cells()] == main_keys  # the grid's runs have no mix: kept
    # a row of its own: a layout, a token shift, its steps and patterns
    row = RowSpec("hwfa8", "rope", layout="hwfa:W=8", settings={"token_shift": 0.5}, steps=3, patterns=("causal",))
    monkeypatch.setattr(table_g, "ROWS", [*table_g.ROWS, row])
    job = g.seed_runs()[-1]
    assert job.row is row and job.cell.model_cfg.layout == "hwfa:W=8" and job.cell.model_cfg.token_shift == 0.5
    assert job.cell.train_cfg.steps == 3 and g.configurations(job) == [Configuration("hwfa8", "trained", None, None,
                                                                                     ("causal",))]
    assert row.describe() == "layout hwfa:W=8, token_shift 0.5, 3 steps" and RowSpec("a", "alibi").describe() is None
    study.cfg.tables["retrieval"].on = False
    assert g.run() is None and g.units() == []
    monkeypatch.setattr(table_g, "ROWS", table_g.ROWS[:-1])
    only = Study(config(data_dir, ("xpos:gamma=0.5",), retrieval=True), tmp_path, progress=False, echo=None)
    assert only.table("retrieval").rows() == [] and only.table("retrieval").run() is None


def test_the_study_layouts_are_rows_of_table_g_and_the_default_study_has_them(tmp_path, data_dir):
    """Each study layout is a row of table G after the scheme rows, labelled as given; a layout that
    shifts tokens itself takes no recipe token shift besides (the two would be refused together), one
    that does not takes the recipe's; the default study (default schemes) has DEFAULT_LAYOUTS, one
    with schemes of its own none unless asked, as ``lexkit study`` does."""
    from lexkit.study import DEFAULT_LAYOUTS, DEFAULT_SCHEMES

    cfg = config(data_dir, ("rope",), retrieval=True)
    cfg.layouts = ["hwfa:W=4,shift=0.25", "hwfa:W=4"]
    g = Study(cfg, tmp_path, progress=False, echo=None).table("retrieval")
    assert [(r.label, r.layout) for r in g.rows()] == [("rope", None), ("hwfa:W=4,shift=0.25", "hwfa:W=4,shift=0.25"),
                                                        ("hwfa:W=4", "hwfa:W=4")]
    shifted, plain = g.seed_runs()[1].cell.model_cfg, g.seed_runs()[2].cell.model_cfg

    def shifts(cfg):  # what each layer shifts (a layout's own +shift, or the config's token shift on every layer)
        return {layer.find("shift").values["F"] for layer in cfg.stack}

    assert shifted.token_shift == 0.0 and shifts(shifted) == {0.25}
    assert plain.token_shift == RECIPE.token_shift == 0.5 and shifts(plain) == {0.5}
    assert len(DEFAULT_LAYOUTS) >= 1 and StudyConfig(data=str(data_dir)).layouts == DEFAULT_LAYOUTS
    assert StudyConfig(schemes=["rope"], data=str(data_dir)).layouts == []
    assert StudyConfig(schemes=list(DEFAULT_SCHEMES), layouts=["hwfa"], data=str(data_dir)).layouts == ["hwfa"]


def test_the_recipe_is_one_definition_for_the_study_and_the_command_line():
    """RECIPE.flags() given to ``lexkit train`` make the configs the study makes from RECIPE.settings()."""
    from lexkit.cli import build_parser
    from lexkit.cli.train import _overrides
    from lexkit.training.settings import configs

    args = build_parser().parse_args(["train", "--scheme", "alibi", "--out", "x", *RECIPE.flags()])
    assert configs(args.preset, "alibi", **_overrides(args)) == configs(RECIPE.preset, "alibi", **RECIPE.settings())
    assert RECIPE.settings(7)["steps"] == 7 and "--steps" in RECIPE.flags(7) and "7" in RECIPE.flags(7)


@pytest.mark.slow  # fast siblings: the test above (plan) and tests/test_report.py (table G from results.json)
def test_tiny_study_writes_table_g_the_scatter_and_the_goal(tmp_path, data_dir):
    out = tmp_path / "study"
    first = Study(config(data_dir, ("rope",), retrieval=True, seeds=2), out, progress=False, echo=None)
    first.run()
    saved = json.loads((out / "results.json").read_text())
    g = saved["retrieval"]
    assert g["mix"] == RECIPE.mix and g["steps"] == 2 and g["multiples"] == [1, 2, 4, 8, 16] and g["seeds"] == 2
    assert g["formats"] == ["tilde"] and g["held_out"] == ["python", "hex", "caret"] and g["size"] == 6
    # rope under causal and window (no table E here), on 2 seeds, in 4 formats
    keys = [(e["label"], e["pattern"], e["seed"], e["format"], e["held_out"]) for e in g["configs"]]
    assert keys == [("rope", p, s, f, f != "tilde") for s in (0, 1) for p in ("causal", f"window:{g['train_len']}")
                    for f in ("tilde", "python", "hex", "caret")]
    entry = g["configs"][0]
    assert len(entry["cells"]) == 5 * len(g["depths"]) and [r["multiple"] for r in entry["rows"]] == [1, 2, 4, 8, 16]
    assert [r["bpb"] is not None for r in entry["rows"]] == [True, False, False, False, True]
    assert [r["bpb"] for r in g["configs"][1]["rows"]] == [r["bpb"] for r in entry["rows"]]  # one bpb, every format
    config_json = json.loads((out / entry["run"] / "config.json").read_text())
    assert config_json["train"]["mix"] == RECIPE.mix and config_json["train"]["steps"] == 2
    report = (out / "report.md").read_text()
    header, rows = retrieval_table(read(saved))
    assert [r[2] for r in rows] == ["trained", "held-out (python, hex, caret)"] * 2
    assert "## G. Use of context" in report and all("| " + " | ".join(r) + " |" in report for r in rows)
    assert "The goal (bpb at 16x within 3 %" in report and ("**met**" in report or "**not met**" in report)
    html = (out / "report.html").read_text()
    assert "G. Use of context" in html and "retrieval_scatter.png" in html
    assert (out / "retrieval_scatter.png").is_file() and (out / "retrieval_heatmap.png").is_file()
    again = Study(config(data_dir, ("rope",), retrieval=True, seeds=2), out, progress=False, echo=None)
    assert again.run().table("retrieval").to_json() == g
    assert {a for t, a in actions(again) if t in ("retrieval", "train")} == {"cached"}


def test_study_dry_run_times_at_the_threads_asked(tmp_path, data_dir, monkeypatch, capsys):
    """--dry-run timed with every core whatever --threads said (143 min estimated, 12.5 ran): it times
    at the threads each worker runs at, --threads N without --jobs (one process), one with --jobs (on the
    toy corpus: the default one, Python's standard library, is read and hashed for nothing checked here)."""
    import lexkit.study.execution as execution

    seen = []

    class Recording(StubTimer):
        def __init__(self, device, threads, **_):
            super().__init__(threads=threads)
            seen.append(threads)

    monkeypatch.setattr(execution, "Timer", Recording)
    argv = ["study", "--preset", "tiny", "--scheme", "alibi", "--data", str(data_dir), "--out", str(tmp_path / "s"),
            "--dry-run", "--no-retrieval", "--lengths", "16,32"]
    assert main([*argv, "--threads", "2"]) == 0 and "with 1 worker " in capsys.readouterr().out
    assert main([*argv, "--jobs", "2"]) == 0 and "with 2 workers " in capsys.readouterr().out
    assert seen == [2, 1]


def test_a_layouts_analytic_resolution_keeps_each_layer_beside_the_mean():
    """Table C's layout rows: the mean over layers, each layer's R (its own curve under the pattern)
    kept beside it, so the report can show the layer the mean hides."""
    from lexkit import GPT, ModelConfig
    from lexkit.resolution import model_curve, resolution
    from lexkit.study.execution import layer_mean, layer_values

    model = GPT(ModelConfig(layout="hwfa:W=8,shift=0.5", n_layers=2, d_model=32, n_heads=2, train_len=32))
    each = layer_values(model, [32, 64], "causal")
    for n in (32, 64):
        want = [float(resolution(model_curve(model, n, "causal", layer=i)).mean()) for i in range(2)]
        assert each[n] == pytest.approx(want) and layer_mean(model, [n], "causal")[n] == pytest.approx(sum(want) / 2)
    assert each[32][0] != pytest.approx(each[32][1])  # the local and the global layer differ: a mean hides one


def test_the_readme_summary_is_the_reports_own_numbers_and_sentence(tmp_path, capsys):
    """`lexkit study --readme FILE` writes the README's block from OUT/results.json: table A's bpb,
    table E's lines, section F's very sentence, table G and its goal's sentence; the rest of FILE is
    left as it was, a second run changes nothing, and a file without the block or a study without
    results.json is one error."""
    import safety_net
    from lexkit.documents.render import markdown
    from lexkit.study.summary import BEGIN, END, summary
    from lexkit.study.tables.extension.queries import extension_lines
    from lexkit.study.tables.extension.report import goal_finding
    from lexkit.study.tables.retrieval.findings import context_goal_finding
    from lexkit.study.tables.retrieval.report import retrieval_table

    saved = json.loads((safety_net.HERE / "results.json").read_text())
    out = tmp_path / "study"
    out.mkdir()
    (out / "results.json").write_text(json.dumps(saved))
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\nbefore\n\n{BEGIN}\nold numbers\n{END}\n\nafter\n")
    assert main(["study", "--out", str(out), "--readme", str(readme)]) == 0
    text = readme.read_text()
    doc = read(saved)
    assert text.startswith("# title\n\nbefore\n\n" + BEGIN) and text.endswith(END + "\n\nafter\n")
    assert "old numbers" not in text and summary(doc) in text
    assert goal_finding(doc) in text  # section F's sentence, computed once for both
    for row in length_table(doc).rows:  # table A's 1x column
        assert f"| {row[0]} | {row[2]} |" in text
    rope = next(line for line in extension_lines(doc) if line.label == "rope")
    assert f"| rope | {rope.bpb[32][0]:.3f} | {rope.bpb[64][0]:.3f} |" in text
    assert markdown([retrieval_table(doc)]).strip() in text  # table G as the report has it, and its goal
    assert context_goal_finding(doc) is not None and context_goal_finding(doc) in text
    assert main(["study", "--out", str(out), "--readme", str(readme)]) == 0 and readme.read_text() == text
    capsys.readouterr()
    readme.write_text("no block here\n")
    assert main(["study", "--out", str(out), "--readme", str(readme)]) == 2
    assert "has no block to write" in capsys.readouterr().err and readme.read_text() == "no block here\n"
    assert main(["study", "--out", str(tmp_path / "none"), "--readme", str(readme)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --readme needs a finished study")


# -- table E (context extension): a study killed inside a fine-tune, its dry run -----------------------
#: table G (use of context) is left out of the table E studies below: its runs train for thousands of
#: steps, and table E is what is measured there
NO_G = {"retrieval": False}


def kill_at(monkeypatch, steps: int, at: int, nth: int = 1):
    """Raise KeyboardInterrupt (as a SIGKILL would stop it: no checkpoint written) the ``nth`` time
    a run of ``steps`` steps reaches step index ``at``: the study's fine-tunes have their own
    number of steps (not the base run's), so the kill lands inside one of them."""
    import lexkit.training.loop as T

    real, seen = T.lr_at, {"n": 0}

    def patched(step, cfg):
        if cfg.steps == steps and step == at:
            seen["n"] += 1
            if seen["n"] == nth:
                raise KeyboardInterrupt
        return real(step, cfg)

    monkeypatch.setattr(T, "lr_at", patched)
    return lambda: monkeypatch.setattr(T, "lr_at", real)


@pytest.mark.slow
def test_a_study_killed_inside_a_finetune_reports_the_same_table_e(tmp_path, data_dir, monkeypatch):
    """(About 30 s: three studies' worth of table E; the fast sibling below trains the study's
    fine-tune configuration alone.) Killed inside the first fine-tune before its first checkpoint (a resume reloads the
    sha256-checked parent), then inside the second after one (a resume continues from it),
    then run to the end: table E, cell for cell, is the uninterrupted study's."""
    monkeypatch.setattr("lexkit.study.execution.write_report", lambda results, out: None)  # figures: not the point
    ft_steps = 4  # checkpoints every ceil(4 / 4) = 1 step
    cfg = StudyConfig(preset="tiny", schemes=["rope"], patterns=["causal"], lengths=[32, 64], steps=3,
                      data=str(data_dir), eval_docs=1, resolution_texts=1, extension_steps=ft_steps, **NO_G)
    whole = Study(cfg, tmp_path / "whole", progress=False, echo=None).run()

    out = tmp_path / "killed"
    restore = kill_at(monkeypatch, ft_steps, at=0)  # in the first fine-tune, before its first checkpoint
    with pytest.raises(KeyboardInterrupt):
        Study(cfg, out, progress=False, echo=None).run()
    restore()
    first = [d for d in (out / "runs").iterdir() if "-ft-" in d.name]
    assert len(first) == 1 and (first[0] / runs.CONFIG).is_file() and not (first[0] / runs.CHECKPOINT).exists()
    restore = kill_at(monkeypatch, ft_steps, at=2, nth=2)  # the first re-runs past 2; then the second stops
    with pytest.raises(KeyboardInterrupt):
        Study(cfg, out, progress=False, echo=None).run()
    restore()
    second = [d for d in (out / "runs").iterdir() if "-ft-" in d.name and d != first[0]]
    checkpointed = [(runs.trainer_state(d) or {}).get("step") for d in second]
    resumed = Study(cfg, out, progress=False, echo=None).run()

    assert len(section(whole).rows) == len(section(resumed).rows) > len(finetunes(32))
    assert extension_table(resumed) == extension_table(whole)
    for a, b in zip(section(whole).rows, section(resumed).rows):
        assert (a.label, a.pattern) == (b.label, b.pattern)
        assert [r.bpb for r in a.results] == [r.bpb for r in b.results], a.label
    assert checkpointed == [2]  # the second was resumed from its checkpoint at step 2
    for row in section(resumed).rows:
        if row.finetune:
            config = json.loads((out / row.finetune.run / runs.CONFIG).read_text())
            assert config["init"]["run"] == str((out / "runs").resolve() / next(
                r.run for r in resumed.runs if r.label == "rope").split("/")[-1])


def test_the_studys_finetune_checkpoints_and_resumes_to_the_same_weights(tmp_path, data_dir, monkeypatch):
    """The study's fine-tune configuration checkpoints every ceil(steps / 4) steps (its cache key
    does not depend on that); killed before its first checkpoint it restarts from its parent,
    killed after one it continues from it, and either way ends with the uninterrupted weights."""
    cfg = StudyConfig(preset="tiny", schemes=["rope"], patterns=["causal"], lengths=[32, 64], steps=3,
                      data=str(data_dir), eval_docs=1, resolution_texts=1, extension_steps=4, **NO_G)
    study = Study(cfg, tmp_path / "study", progress=False, echo=None)
    plan = study.plan
    cell = plan.cells()[0]
    base = tmp_path / "study" / "runs" / cell.name
    train(base, cell.model_cfg, cell.train_cfg, progress=False, corpus=plan.corpus)
    ft = finetunes(32)[0]
    model_cfg, train_cfg, key = finetune.configs(base, cell, ft, 4)
    assert train_cfg.save_every == 1 and model_cfg.train_len == ft.train_len
    # the estimate's configs of it, before the parent exists, are these
    assert finetune.finetuned(cell.model_cfg, cell.train_cfg, ft, 4) == (model_cfg, train_cfg)
    assert finetune.configs(base, cell, ft, 4)[2] == key
    whole = tmp_path / "whole"
    train(whole, model_cfg, train_cfg, progress=False, corpus=plan.corpus, init=base)
    for at in (0, 2):
        out = tmp_path / f"killed{at}"
        restore = kill_at(monkeypatch, train_cfg.steps, at)
        with pytest.raises(KeyboardInterrupt):
            train(out, model_cfg, train_cfg, progress=False, corpus=plan.corpus, init=base)
        restore()
        assert (runs.trainer_state(out) or {}).get("step", 0) == at
        train(out, model_cfg, train_cfg, resume=True, progress=False, corpus=plan.corpus)
        assert (out / runs.WEIGHTS).read_bytes() == (whole / runs.WEIGHTS).read_bytes(), at


@pytest.mark.parametrize("steps", [None, "0"])
def test_study_dry_run_plans_table_e(tmp_path, data_dir, capsys, monkeypatch, steps):
    """What table E plans, timed by stubs (the estimate's real timing is test_dry_run_lists_cells_and_trains_nothing's:
    here half a second a run of timing table E's methods and fine-tunes, for nothing this test reads)."""
    stub_study_timer(monkeypatch)
    argv = ["study", "--preset", "tiny", "--scheme", "rope", "--data", str(data_dir), "--lengths", "32,64",
            "--out", str(tmp_path / "s"), "--dry-run", "--no-retrieval"]
    assert main(argv + ([] if steps is None else ["--extension-steps", steps])) == 0
    text = capsys.readouterr().out
    assert "table E (context extension of rope)" in text
    if steps is None:
        assert all(ft.label in text for ft in finetunes(32)) and "3 fine-tunes of 60 steps" in text
    else:
        assert not any(ft.label in text for ft in finetunes(32)) and "no fine-tunes (--extension-steps 0)" in text
    assert not (tmp_path / "s" / "runs").exists()
