"""The stop rule of a run trained with a retrieval mix (lexkit.training.stopping): written and read back, the
step it stops at from a run's probes, the trainer stopping there (recorded in its checkpoint and
metrics, resumed to the same step and weights), and in the cache key of a run that has one only."""

from __future__ import annotations

import dataclasses

import pytest

from lexkit.cli import main
from lexkit.data.corpus import Corpus
from lexkit.training import runs, stopping
from lexkit.training.loop import train
from lexkit.training.settings import TrainConfig, configs
from stop import stop_at
from toy_corpus import DOCS


def test_a_rule_is_written_once_and_bad_ones_are_refused():
    rule = stopping.parse("probe:probes=3,exact=0.95")
    assert rule == stopping.StopRule(0.95, 3, 0) and rule.spec == "probe:exact=0.95,probes=3,after=0"
    assert stopping.canonical("probe") == "probe:exact=0.9,probes=5,after=0" and stopping.canonical(" off ") == ""
    assert stopping.parse("none") is None and stopping.parse("") is None
    assert TrainConfig(stop="probe:after=7").stop == "probe:exact=0.9,probes=5,after=7" and TrainConfig().stop == ""
    for bad, words in (("patience:k=3", "unknown stop rule 'patience'"), ("probe:exact=0", "must be in (0, 1]"),
                       ("probe:probes=0", "must be >= 1"), ("probe:steps=3", "unknown parameter 'steps'"),
                       ("probe:exact=high", "not a valid float")):
        with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
            stopping.parse(bad)


def test_the_step_it_stops_at():
    """The first validation at ``after`` or later that ends ``probes`` in a row with every task's probe
    at ``exact``; rows without the probes (logging rows) do not break a streak; a dip restarts it."""
    def rows(values, every=1):
        out = []
        for i, (a, b) in enumerate(values, start=1):
            out += [{"step": i * every - 1, "loss": 1.0}, {"step": i * every, "val_a_exact": a, "val_b_exact": b}]
        return out

    rule = stopping.StopRule(0.9, 3, 0)
    high, low = (0.95, 0.9), (0.95, 0.5)
    assert stopping.stop_step(rows([high, high, low, high, high, high, high]), rule, ["a", "b"]) == 6
    assert stopping.stop_step(rows([high] * 3, every=10), stopping.StopRule(0.9, 3, 45), ["a", "b"]) is None
    assert stopping.stop_step(rows([high] * 5, every=10), stopping.StopRule(0.9, 3, 45), ["a", "b"]) == 50
    assert stopping.stop_step(rows([high] * 5), rule, ["a"]) == 3 and stopping.stop_step(rows([low] * 9), rule,
                                                                                            ["b"]) is None
    assert stopping.stop_step(rows([high] * 5), rule, []) is None  # no mix: never


@pytest.fixture
def probed(monkeypatch):
    """The trainer's probe reading a fixed sequence by step (every step validated): exact match 0.95
    at steps 2-3, 0.2 at 4, 0.95 from 5 on; the steps it was read at recorded."""
    import lexkit.training.loop as T

    values, real, step, read = {1: 0.0, 2: 0.95, 3: 0.95, 4: 0.2}, T.lr_at, {"now": 0}, []

    def lr_at(index, cfg):
        step["now"] = index + 1  # the step being taken
        return real(index, cfg)

    def probe(model, probe, device):
        read.append(step["now"])
        return {"val_copy_bits": 1.0, "val_copy_exact": values.get(step["now"], 0.95)}

    monkeypatch.setattr(T, "lr_at", lr_at)
    monkeypatch.setattr(T, "validation_tasks", probe)
    return read


def test_the_trainer_stops_at_the_rules_step_and_a_resumed_run_at_the_same(tmp_path, probed, monkeypatch):
    """probe:exact=0.9,probes=3,after=4 over 20 steps: stopped at step 7 (5, 6, 7 after the dip),
    the checkpoint's state says so, its metrics row too; trained again it does nothing; killed at step
    5 (checkpoint at 4) and resumed, it stops at 7 with the same weights."""
    corpus = Corpus("toy", [d * 2 for d in DOCS[:-3]], DOCS[-3:], {"source": "toy"})
    model_cfg, train_cfg = configs("tiny", "rope", steps=20, mix="copy:0.5", stop="probe:exact=0.9,probes=3,after=4",
                                   eval_every=1, log_every=1, save_every=2, eval_windows=2)
    whole = tmp_path / "whole"
    summary = train(whole, model_cfg, train_cfg, progress=False, corpus=corpus)
    state = runs.trainer_state(whole)
    assert summary["step"] == summary["stopped"] == 7
    assert (state["step"], state["stopped"], state["done"]) == (7, 7, True)
    rows = runs.read_metrics(whole)
    assert rows[-1]["step"] == 7 and rows[-1]["stopped"] is True and runs.finished(state, 20)
    assert runs.read_config(whole)["train"]["stop"] == "probe:exact=0.9,probes=3,after=4"
    assert probed == [1, 2, 3, 4, 5, 6, 7]
    assert train(whole, model_cfg, train_cfg, progress=False, corpus=corpus, resume=True)["step"] == 7
    assert probed == [1, 2, 3, 4, 5, 6, 7]  # finished: nothing ran
    killed = tmp_path / "killed"
    restore = stop_at(monkeypatch, 5)  # raised before step index 5: the checkpoint of step 4 kept
    with pytest.raises(KeyboardInterrupt):
        train(killed, model_cfg, train_cfg, progress=False, corpus=corpus)
    restore()
    assert runs.trainer_state(killed)["step"] == 4
    assert train(killed, model_cfg, train_cfg, progress=False, corpus=corpus, resume=True)["step"] == 7
    assert runs.trainer_state(killed)["stopped"] == 7 and probed[-3:] == [5, 6, 7]  # the dip at 4 read back
    assert (killed / runs.WEIGHTS).read_bytes() == (whole / runs.WEIGHTS).read_bytes()


def test_a_rule_is_in_the_cache_key_of_a_run_that_has_one_only(tmp_path):
    """A run without a rule keeps the config and key it had before rules (``stop`` left out), one
    with a rule is another run; ``lexkit train --stop`` needs a mix, and a bad rule is one line."""
    plain = TrainConfig()
    assert "stop" not in plain.recorded() and plain.recorded() == {
        k: v for k, v in dataclasses.asdict(plain).items() if k not in ("stop", "curriculum", "compile")}  # none set
    assert TrainConfig(stop="probe").recorded()["stop"] == "probe:exact=0.9,probes=5,after=0"
    from lexkit.study import StudyConfig
    from lexkit.study.plan import Plan

    plan = Plan(StudyConfig(preset="tiny", schemes=["rope"]))
    plan._corpus = Corpus("toy", list(DOCS[:-3]), DOCS[-3:], {"source": "toy"})
    keys = {plan.cell("tiny", "rope", 0, mix="copy:0.5", stop=stop).key for stop in ("", "probe", "probe:after=9")}
    assert len(keys) == 3


def test_lexkit_train_stop_errors_are_one_line(tmp_path, capsys):
    base = ["train", "--scheme", "rope", "--preset", "tiny", "--out", str(tmp_path / "r"), "--quiet"]
    assert main([*base, "--stop", "probe"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: --stop probe:exact=0.9,probes=5,after=0 watches the probe of a retrieval mix and this run has none: "
        "give --mix too (e.g. --mix induction:0.75), or leave out --stop"]
    assert main([*base, "--mix", "copy:0.5", "--stop", "probe:exact=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "exact=2 is out of range (must be in (0, 1])" in err[0]
    assert not (tmp_path / "r").exists()
