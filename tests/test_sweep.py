"""``lexkit sweep``: a 2-arm x 2-seed sweep at the tiny preset trains each run once and scores it as table
G scores (the same needles, the same pooling and intervals), and on kvthread and ordinal where their
documents fit; its table, JSON and figure; re-rendered from the cache without training; its workers
rebuild the same units; a bad config is one line naming the key."""

from __future__ import annotations

import dataclasses
import functools
import json
import pickle
from types import SimpleNamespace

import pytest

from lexkit import tasks
from lexkit.cli import main
from lexkit.data.mix import parse_mix
from lexkit.study.sweep import Sweep, SweepConfigError, load, parse
from lexkit.study.sweep import report as sweep_report
from lexkit.study.sweep.work import phase_change
from lexkit.study.tables.retrieval import queries
from lexkit.study.tables.retrieval.rows import RetrievalSection
from toy_corpus import STUDY_DOCS, write_corpus

ARMS = [{"label": "rope", "scheme": "rope"}, {"label": "hwfa8", "layout": "hwfa:W=8", "train": {"token_shift": 0.25}}]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("data"), STUDY_DOCS)


def tiny(data_dir, **more) -> dict:
    return {"name": "tiny", "preset": "tiny", "steps": 3, "seeds": 2, "samples": 1, "eval_docs": 2,
            "data": str(data_dir), "arms": ARMS, **more}


def test_a_tiny_sweep_is_scored_as_table_g_scores_and_renders_again_from_its_cache(tmp_path, data_dir, capsys,
                                                                                   monkeypatch):
    config = tmp_path / "sweep.json"
    # batches of 8 (the tiny preset's): the recipe's 64 made eight times the training documents for nothing read here
    config.write_text(json.dumps(tiny(data_dir, batch=8)))
    out = tmp_path / "out"
    assert main(["sweep", str(config), "--out", str(out), "--jobs", "1", "--quiet", "--batch-seeds"]) == 0
    printed = capsys.readouterr().out
    assert "sweep tiny" in printed and f"report: {out}/sweep.md" in printed
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    # each arm's two seeds trained once, together (lexkit.training.batched), by its first seed's unit; the second
    # seed's unit then finds its run trained
    trained = [e["name"] for e in log if e["task"] == "train" and e["action"] == "ran"]
    assert len(trained) == len(set(trained)) == 4
    assert [e["name"] for e in log if e["action"] != "ran"] == [n for n in trained if "-s1-" in n]
    assert [e["task"] for e in log].count("task") == 4 * 2  # each run on kvthread and ordinal
    saved = json.loads((out / "sweep.json").read_text())
    g, tasks = saved["retrieval"], saved["tasks"]
    assert g["steps"] == 3 and g["seeds"] == 2 and g["preset"] == "tiny" and g["formats"] == ["tilde"]
    assert sorted(tasks) == ["kvthread", "ordinal"]
    # the arm's own training: hwfa:W=8 with token shift 0.25 on each seed
    hwfa = [e for e in g["configs"] if e["label"] == "hwfa8"]
    assert {e["seed"] for e in hwfa} == {0, 1} and {e["format"] for e in hwfa} == {"tilde", "python", "hex", "caret"}
    run_config = json.loads((out / hwfa[0]["run"] / "config.json").read_text())
    assert run_config["model"]["layout"] == "hwfa:W=8" and run_config["model"]["token_shift"] == 0.25
    assert run_config["batched"] == {"seeds": [0, 1], "kernel": "auto"}
    # kvthread's documents need 51 bytes: scored from 2x (64 bytes) on, at every depth, on both seeds
    kv = [e for e in tasks["kvthread"] if e["label"] == "rope"]
    assert [r["multiple"] for r in kv[0]["rows"]] == [2, 4, 8, 16] and {e["seed"] for e in kv} == {0, 1}
    assert len(kv[0]["cells"]) == 4 * 5 and all(c["samples"] == 1 for c in kv[0]["cells"])
    # the table: one row per arm, the tilde column at 1x pooled over both seeds as table G pools it,
    # with table G's interval; kvthread "-" at 1x is not shown (16x only)
    header, rows = saved["table"]["header"], saved["table"]["rows"]
    assert [r[0] for r in rows] == ["rope", "hwfa8"] and header[6:8] == ["tilde 1x", "tilde 16x"]
    assert header[8:13] == ["python 16x", "hex 16x", "caret 16x", "kvthread 16x", "ordinal 16x"]
    cells = [c for e in g["configs"] if e["label"] == "rope" and e["format"] == "tilde" for c in e["cells"]
             if c["length"] == g["train_len"]]
    k, n = sum(c["correct"] for c in cells), sum(c["samples"] for c in cells)
    if hasattr(queries, "interval"):  # table G's interval over seeds: what its queries say of these entries
        section = RetrievalSection.from_json({**g, "configs": [e for e in g["configs"] if e["label"] == "rope"
                                                               and e["format"] == "tilde"]})
        (line,) = queries.retrieval_lines(SimpleNamespace(table=lambda key: section), "trained")
        low, high = queries.interval(line, 1)
    else:  # over the needles pooled across seeds (Wilson)
        low, high = queries.wilson(k, n)
    assert n == 2 * 5 and rows[0][6] == f"{100 * k / n:.0f} [{100 * low:.0f}-{100 * high:.0f}]"
    assert rows[0][2] == "2" and rows[0][-1] in ("no", "**met**")
    assert queries.paired_documents(RetrievalSection.from_json(g)) == [1]  # the one validation document
    md = (out / "sweep.md").read_text()
    assert "## Sweep: tiny" in md and "| " + " | ".join(rows[1]) + " |" in md
    assert (out / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    # re-rendered from the cache: nothing trains or scores again, the same table (the figure checked
    # above is not drawn again here: about a second of matplotlib's layout)
    monkeypatch.setattr(sweep_report, "figure", lambda doc, path: None)
    (out / "sweep.md").unlink()
    assert main(["sweep", str(config), "--out", str(out), "--report-only", "--quiet"]) == 0
    assert (out / "sweep.md").read_text() == md and len((out / "log.jsonl").read_text().splitlines()) == len(log)
    # the same config over workers: each builds these units by name (the config and batching travel to them)
    sweep = Sweep(load(config), out, progress=False, echo=None, jobs=2, batch_seeds=True)
    build = pickle.loads(pickle.dumps(sweep.build()))
    rebuilt = build.make(*build.args, **build.kwargs)
    assert [(u.name, u.needs) for u in rebuilt.units()] == [(u.name, u.needs) for u in sweep.units()]
    for second in (u for u in sweep.units() if u.job == "train" and "-s1-" in u.name):  # waits for its arm's s0
        (need,) = second.needs
        assert need.startswith(second.name.split("-s1-")[0] + "-s0-")
    assert all(u.done() for u in rebuilt.units())


def test_the_phase_change_is_the_first_validation_copying_half_its_needles():
    rows = [{"step": 10, "loss": 2.0}, {"step": 100, "val_induction_exact": 0.2},
            {"step": 200, "val_induction_exact": 0.5}, {"step": 300, "val_induction_exact": 0.1}]
    assert phase_change(rows, "induction:0.75") == 200 and phase_change(rows[:2], "induction:0.75") is None
    assert phase_change(rows, "") is None


@pytest.mark.parametrize("change, words", [
    ({"arm": []}, "arm: unknown key; keys: arms, name"),
    ({"arms": []}, "arms: a non-empty list of arms is required"),
    ({"arms": [ARMS[0], ARMS[0]]}, "arms: two arms are labelled 'rope'"),
    ({"arms": [{"scheme": "rope"}]}, "arms[0].label: every arm needs a label"),
    ({"arms": [{"label": "x", "train": {"steps": 9}}]}, "arms[0] (x).train.steps: set by the sweep"),
    ({"arms": [{"label": "x", "colour": 1}]}, "arms[0].colour: unknown key; keys of an arm:"),
    ({"seeds": 0}, "seeds: seeds must be a positive integer"),
    ({"seeds": "3"}, "seeds: an integer is expected, got '3'"),
    ({"first_seed": -1}, "first_seed: first_seed must be an integer >= 0 (at most 100), got -1"),
    ({"stop": "probe:exact=2"}, "stop: stop rule 'probe:exact=2': parameter exact=2 is out of range"),
    ({"tasks": ["kvthread:hops=0"]}, "tasks:"),
    ({"tasks": ["kvthread:hops=99"]}, "tasks: kvthread:hops=99's documents need at least 2088 bytes, more than the "
                                      "longest length the sweep scores (16x the training length = 512)"),
    ({"patterns": ["bca:3"]}, "patterns:"),
    ({"preset": "huge"}, "preset: unknown preset 'huge'"),
    ({"eval_docs": 1}, "eval_docs: eval_docs must be an integer >= 2 (at most 2,147,483,648), got 1: the paired bpb's "
                       "interval over documents needs at least 2 documents"),
    ({"eval_docs": 0}, "eval_docs: eval_docs must be a positive integer"),
    ({"token_shift": 2, "arms": [{"label": "s", "layout": "rope@window:16+shift;none+shift"}]},
     "token_shift: token_shift must be a fraction in [0, 1), got 2"),
])
def test_a_bad_config_is_one_line_naming_the_key(tmp_path, data_dir, capsys, change, words):
    config = tmp_path / "sweep.json"
    config.write_text(json.dumps({**tiny(data_dir), **change}))
    assert main(["sweep", str(config), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: sweep config {config}: ") and words in err[0], err
    assert not (tmp_path / "out").exists()


def test_an_arm_that_cannot_train_or_a_file_that_is_no_config_is_one_line(tmp_path, data_dir, capsys):
    config = tmp_path / "sweep.json"
    config.write_text(json.dumps(tiny(data_dir, arms=[{"label": "i4", "layout": "irope"}])))
    assert main(["sweep", str(config), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: arm 'i4': ") and "irope" in err[0], err
    config.write_text("{not json")
    assert main(["sweep", str(config), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith(f"error: sweep config {config}: not JSON")
    assert main(["sweep", str(tmp_path / "none.json"), "--out", str(tmp_path / "out")]) == 2
    assert "cannot read it" in capsys.readouterr().err and not (tmp_path / "out").exists()
    with pytest.raises(SweepConfigError, match="a JSON object is expected"):
        parse([1, 2])


@pytest.fixture
def one_corpus(monkeypatch):
    """The hunt configs' corpus (Python's standard library, read and hashed: a tenth of a second) read once
    for the module: every sweep plan below names its runs by that corpus's fingerprint."""
    from lexkit.study import plan

    monkeypatch.setattr(plan, "load_corpus", _load_corpus_once)


@functools.cache
def _load_corpus_once(spec: str):
    from lexkit.data.corpus import load_corpus

    return load_corpus(spec)


def test_the_example_config_is_a_sweep(one_corpus):
    """benchmarks/sweeps/hunt.json (docs/hunt.md's pre-registered arms A0-A10) parses and builds its
    runs: 11 arms on 3 seeds, A0 on table G's mix and the others on the hunt's, each arm what it says."""
    from pathlib import Path

    cfg = load(Path(__file__).parents[1] / "benchmarks" / "sweeps" / "hunt.json")
    assert cfg.seeds == 3 and len(cfg.arms) == 11 and cfg.stop == "" and cfg.steps == 4000
    assert cfg.tasks == ("kvthread", "ordinal") and cfg.patterns == ("causal",)
    runs = {run.row.label.split()[0]: run.cell for run in Sweep(cfg, Path("unused"), progress=False,
                                                                  echo=None).seed_runs() if run.cell.seed == 0}
    assert sorted(runs, key=lambda a: int(a[1:])) == [f"A{i}" for i in range(11)]
    assert runs["A0"].train_cfg.mix == "induction:0.75" and runs["A1"].train_cfg.mix == cfg.mix
    assert runs["A9"].model_cfg.n_layers == 4 and runs["A8"].model_cfg.untied_head
    assert runs["A10"].train_cfg.drop_positions_at == 0.875 and "fitted" in runs["A10"].model_cfg.layout


def test_the_hunts_follow_up_configs_are_sweeps(one_corpus):
    """benchmarks/sweeps/hunt-seed0.json (every arm, seed 0) and hunt-confirm.json (A0, A1 and the two arms
    ranked first on seed 0, three seeds) build the same runs as hunt.json (one cache); hunt-a11.json's arm
    writes out a 4-layer layout with its own n_layers 4 on the 2-layer preset, which counts the arm's
    layers, not the preset's; hunt-a11-rule.json is A11 by its rule on three seeds."""
    from pathlib import Path

    here = Path(__file__).parents[1] / "benchmarks" / "sweeps"

    def cells(name):
        cfg = load(here / name)
        runs = Sweep(cfg, Path("unused"), progress=False, echo=None).seed_runs()
        return {(run.row.label, run.cell.seed): run.cell for run in runs}

    full, confirm, first = cells("hunt.json"), cells("hunt-confirm.json"), cells("hunt-seed0.json")
    paired = cells("hunt-paired-a0-a3.json")  # A0 and A3 on three seeds: hunt.json's runs
    assert len(paired) == 6 and all(cell.name == full[key].name for key, cell in paired.items())
    assert len(confirm) == 12 and all(cell.name == full[key].name for key, cell in confirm.items())
    assert {label for label, _ in first} == {label for label, _ in full} and {seed for _, seed in first} == {0}
    assert all(cell.name == full[key].name for key, cell in first.items())
    (a11,) = cells("hunt-a11.json").values()
    assert a11.model_cfg.n_layers == 4 and a11.model_cfg.untied_head and a11.model_cfg.token_shift == 0.0
    assert [layer.find("conv") is not None for layer in a11.model_cfg.stack] == [True, True, True, False]
    # A11 by its rule on three seeds (A3 and A4 raised A1 on each): A3's and A4's global-layer changes together
    rule = cells("hunt-a11-rule.json")
    assert sorted(seed for _, seed in rule) == [0, 1, 2]
    global_layer = rule[("A11 kshift + gate global", 0)].model_cfg.stack[1]
    assert {"kshift", "gate", "logn", "shift"} <= {m.name for m in global_layer.modifiers}


def test_an_arms_empty_mix_means_no_mix_not_the_sweeps(data_dir):
    """An arm's "mix": "" was dropped and the sweep's mix trained in its place."""
    from pathlib import Path

    cfg = parse(tiny(data_dir, mix="induction:0.75", arms=[{"label": "plain", "mix": ""}, {"label": "sweep's"}]))
    runs = {run.row.label: run.cell for run in Sweep(cfg, Path("unused"), progress=False, echo=None).seed_runs()
            if run.cell.seed == 0}
    assert runs["plain"].train_cfg.mix == "" and runs["sweep's"].train_cfg.mix == "induction:0.75"


A3 = "rope@window:16+shift;none@causal+logn+shift+kshift"


@pytest.mark.parametrize("arms, words", [
    ([{"label": "plain"}, {"label": "kv arm", "mix": "kvthread:0.5"}],
     "error: arm 'kv arm': --mix kvthread: its documents need at least 51 bytes, more than the training length 32"),
    ([{"label": "a", "layout": A3}, {"label": "b", "layout": "rope@window:16+shift;none@causal+kshift+shift+logn"}],
     "error: arms 'a' and 'b' train the same run"),
    ([{"label": "a", "scheme": "alibi"}, {"label": "b", "scheme": "alibi", "train": {"embedding_decay": 0.1}}],
     "error: arms 'a' and 'b' train the same run"),
])
def test_an_arm_that_cannot_train_at_the_preset_or_trains_anothers_run_is_refused_before_any_work(
        tmp_path, data_dir, capsys, arms, words):
    """Both passed the config check and --dry-run: the first stopped mid-sweep after other arms had
    written, naming no arm; the twins failed on a unit name (or trained one model twice)."""
    config = tmp_path / "sweep.json"
    config.write_text(json.dumps(tiny(data_dir, arms=arms)))
    for dry in ([], ["--dry-run"]):
        assert main(["sweep", str(config), "--out", str(tmp_path / "out"), *dry]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(words), err
        assert not (tmp_path / "out").exists()


def test_a_run_is_found_under_another_spelling_of_its_layout_and_its_settings(tmp_path, data_dir):
    """The cache keys on the canonical layer stack and on resolved settings: A3's layout with its modifiers in
    another order and an explicit default embedding decay is A3's run, not 15 minutes of another."""
    from lexkit.study.plan import digest

    out = tmp_path / "out"
    first = Sweep(parse(tiny(data_dir, seeds=1, tasks=[], arms=[{"label": "a3", "layout": A3}])), out,
                  progress=False, echo=None)
    (trained,) = first.seed_runs()
    respelled = Sweep(parse(tiny(data_dir, seeds=1, tasks=[], arms=[
        {"label": "again", "layout": "rope@window:16+shift;none@causal+kshift+shift+logn",
         "train": {"embedding_decay": 0.1}}])), out, progress=False, echo=None)
    (same,) = respelled.seed_runs()
    assert same.cell.key == trained.cell.key and same.cell.name != trained.cell.name  # nothing on disk yet
    (out / "runs" / trained.cell.name).mkdir(parents=True)
    (same,) = respelled.seed_runs()
    assert same.cell.name == trained.cell.name
    assert respelled.cache.run_dir(same.cell) == out / "runs" / trained.cell.name
    # a run trained before keys were canonical is found under its own spelling, with the key its scores have
    cell = trained.cell
    old = digest({"model": {**dataclasses.asdict(cell.model_cfg), "resolved": cell.model_cfg.resolved()},
                  "train": cell.train_cfg.recorded(), "data": first.plan.corpus.fingerprint,
                  "tasks": [tasks.identity(t) for t in parse_mix(cell.train_cfg.mix)]})
    assert old != cell.key  # the layout as typed is not its canonical layer stack
    (out / "runs" / cell.name).rmdir()
    (out / "runs" / dataclasses.replace(cell, key=old).name).mkdir()
    (legacy,) = first.seed_runs()
    assert legacy.cell.key == old and (out / "runs" / legacy.cell.name).is_dir()


def test_first_seed_trains_the_runs_a_sweep_from_seed_0_trains_for_those_seeds(tmp_path, data_dir):
    """Seeds 1 and 2 in a sweep of their own (``first_seed``) are seeds 1 and 2 of the sweep from seed 0:
    the same cells (keys, names, settings), so their runs and scores read the same; a sweep from seed 0
    writes its config without the key, as before it existed."""
    arms = [{"label": "a3", "layout": A3}]
    whole = Sweep(parse(tiny(data_dir, seeds=3, tasks=[], arms=arms)), tmp_path / "a", progress=False, echo=None)
    rest = Sweep(parse(tiny(data_dir, seeds=2, first_seed=1, tasks=[], arms=arms)), tmp_path / "b",
                 progress=False, echo=None)
    later = [(r.cell.seed, r.cell.key, r.cell.name, r.cell.train_cfg) for r in rest.seed_runs()]
    assert [seed for seed, *_ in later] == [1, 2]
    assert later == [(r.cell.seed, r.cell.key, r.cell.name, r.cell.train_cfg) for r in whole.seed_runs()][1:]
    assert "first_seed" not in whole.sweep.to_json() and rest.sweep.to_json()["first_seed"] == 1
    assert rest.g.settings.seed_list() == range(1, 3)


def test_eval_docs_is_the_most_documents_the_paired_bpb_reads(data_dir):
    """The sweep's eval_docs was read by nothing (table G's bpb read up to 96 documents whatever it said)."""
    from pathlib import Path

    from lexkit.data.corpus import Corpus

    def documents(**more):
        sweep = Sweep(parse(tiny(data_dir, **more)), Path("unused"), progress=False, echo=None)
        sweep.plan._corpus = Corpus("toy", [b"x" * 600] * 4, [b"y" * 600] * 5 + [b"short"], {"source": "toy"})
        return sweep.g.bpb_documents(), sweep.g.cache_path("k", sweep.configuration(sweep.seed_runs()[0]))

    (three, key3), (every, key96) = documents(eval_docs=3), documents(eval_docs=96)
    assert three == 3 and every == 5 and key3 != key96  # at most eval_docs, at most those of 16x + 1 bytes
    assert parse({"arms": ARMS}).eval_docs == 96  # table G's, so a sweep's runs score as the study's
