"""The dry run's estimate: each unit timed by what it runs (a ReRoPE scoring by ReRoPE's forward, a
fine-tune by steps at its own length), and the wall time the schedule of the units over the workers,
dependencies included, not the sum over them. (A half-trained run's remaining steps: tests/test_study.py.)"""

from __future__ import annotations

import pytest

from lexkit.model.gpt import GPT
from lexkit.study import Study, StudyConfig
from lexkit.study.estimate import Load, Timer, estimate, load_line
from lexkit.study.schedule import Task, schedule
from stub_timer import StubTimer
from toy_corpus import STUDY_DOCS, write_corpus


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("data"), STUDY_DOCS)


def study(data_dir, out, **more) -> Study:
    cfg = StudyConfig(preset="tiny", schemes=["rope"], patterns=["causal"], lengths=[16, 32], steps=4,
                      data=str(data_dir), eval_docs=1, resolution_texts=1, extension_steps=2, retrieval_steps=3,
                      retrieval_samples=1, **more)
    return Study(cfg, out, progress=False, echo=None)


def unit(s: Study, name: str):
    return next(u for u in s.units() if u.name.startswith(name.split(" ", 1)[0]) and u.label == name.split(" ", 1)[1])


def test_each_unit_is_timed_by_the_forward_it_runs(tmp_path, data_dir, monkeypatch):
    """ReRoPE's scoring in table G and leaky ReRoPE + log-n in table E are timed by models that run
    those schemes (the dry run once timed rope's plain forward for them: 8 s estimated, 144-202 s
    run); a fine-tune's steps at 4x the training length under its own scheme; nothing trains."""
    s = study(data_dir, tmp_path / "s", retrieval_methods=True)
    forwards, real = [], GPT.forward

    def recording(self, *args, **kwargs):
        forwards.append((self.cfg.scheme, self.cfg.logn, args[0].shape[-1]))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(GPT, "forward", recording)
    g = next(u for u in s.units() if u.name.startswith("score mix-rope") and u.label == "ReRoPE w=16")
    cost = g.cost(Timer("cpu", 1))
    assert cost.seconds > 0 and cost.left == cost.seconds and forwards
    assert {scheme for scheme, _, _ in forwards} == {"rerope:w=16"}  # and never rope's plain path
    assert max(n for _, _, n in forwards) >= 16 * 32  # scored at 16x, as the table scores it
    forwards.clear()
    e = next(u for u in s.units() if u.name.startswith("evaluate rope") and u.label.endswith("+ log-n"))
    e.cost(Timer("cpu", 1))
    assert {(scheme, logn) for scheme, logn, _ in forwards} == {("rerope:w=16,k=16.0", True)}
    timer = StubTimer()
    ft = next(u for u in s.units() if u.name.startswith("fine-tune rope") and u.label.startswith("YaRN"))
    assert ft.cost(timer).parts["train_s"] == 2.0  # extension_steps 2 at 1 s each
    assert ("step", "rope:scaling=yarn,factor=4.0,original_len=32", 128, 8) in timer.asked
    assert not (tmp_path / "s" / "runs").exists()


def test_the_wall_time_is_the_schedule_over_the_workers(tmp_path, data_dir):
    """With a step at 1 s and nothing else timed: each unit's seconds are its steps, table G's scoring
    waits for its run and table E's units for the grid's rope cell, and the total over two workers
    is the schedule's makespan: over three workers the longest chain (the rope cell, then a
    fine-tune), 6 s where the task time over three is 5.3 s."""
    s = study(data_dir, tmp_path / "s", retrieval_seeds=2, retrieval_methods=False)
    estimated = s.estimate(jobs=3, timer=StubTimer(step=1.0, other=0.0))
    units = {u["name"]: u for u in estimated["units"]}
    cell = next(u for u in estimated["units"] if u["job"] == "cell")
    assert cell["seconds"] == 4.0 and estimated["jobs"] == 3
    for u in estimated["units"]:
        if u["table"] == "extension":
            assert u["needs"] == [cell["name"]]
        if u["table"] == "retrieval" and u["job"] != "train":
            assert [units[n]["job"] for n in u["needs"]] == ["train"]
    fine_tunes = [u for u in estimated["units"] if u["job"] == "fine-tune"]
    assert [u["seconds"] for u in fine_tunes] == [2.0, 2.0, 2.0] and estimated["task_s"] == 4 + 3 * 2 + 2 * 3
    want = schedule([Task(u["name"], u["seconds"], tuple(u["needs"])) for u in estimated["units"]], 3).makespan
    assert estimated["total_s"] == want == estimated["critical_s"] == 6.0 > estimated["task_s"] / 3
    assert s.estimate(jobs=2, timer=StubTimer())["total_s"] == 8.0  # two workers: 8 s
    # nothing here; no stop rule
    assert estimated["left_s"] == estimated["total_s"] and estimated["least_s"] == estimated["left_s"]
    assert s.estimate(jobs=1, timer=StubTimer())["total_s"] == estimated["task_s"]


@pytest.mark.parametrize("busy, cores, jobs, threads, want", [
    (0.0, 2, 2, 1, 1.0),        # idle cores: two one-thread workers run as the unit ran timed alone
    (2.0, 2, 2, 1, 4 / 3),      # both cores busy elsewhere: timed at 2/3 of a core, run at 1/2 of one
    (1.0, 2, 2, 1, 3 / 2),      # one busy: timed on a free core, run at 2/3 of one
    (5.0, 2, 1, None, 1.0),     # one process runs as it was timed, whatever the load
    (None, 2, 2, 1, 1.0),       # the load unknown: nothing assumed
    (3.0, 16, 4, 2, 1.0),       # 8 threads and 3 busy of 16 cores: room for all
])
def test_the_workers_share_of_the_cores_scales_what_one_unit_took_timed_alone(busy, cores, jobs, threads, want):
    """--dry-run times each unit alone while the study runs --jobs of them beside whatever else
    runs: 5:55 estimated, 15:17 measured at --jobs 2 on a shared 2-core machine."""
    assert Load(busy, cores).factor(jobs, threads) == pytest.approx(want)


def test_the_dry_run_scales_its_units_by_the_load_and_says_it_is_a_snapshot(tmp_path, data_dir):
    s = study(data_dir, tmp_path / "s", retrieval_seeds=1, retrieval_methods=False)
    timer = StubTimer(step=1.0, other=0.0)
    plain = estimate(s.units(), timer, 2)
    timer.threads = 1
    loaded = estimate(s.units(), timer, 2, Load(2.0, 2))
    assert loaded["factor"] == pytest.approx(4 / 3) and plain["factor"] == 1.0 and load_line(plain) == ""
    assert [u["seconds"] for u in loaded["units"]] == pytest.approx([u["seconds"] * 4 / 3 for u in plain["units"]])
    assert loaded["total_s"] == pytest.approx(plain["total_s"] * 4 / 3)
    assert load_line(loaded) == (
        "timed just now, one unit at a time, with other processes keeping 2.0 of the 2 cores busy: a snapshot of "
        "this machine's load (a job that starts or ends changes it); 2 workers share the cores with them, so each "
        "unit is put at 1.33x its time alone")


def test_the_estimate_counts_the_documents_an_evaluation_scores_not_the_ones_asked(tmp_path, data_dir):
    """eval_docs: 100000000 was accepted and put at 2,671 h: an evaluation scores the documents long
    enough for the longest length, however many more are asked for."""
    from lexkit.evaluate import select_documents

    def planned(docs):
        cfg = StudyConfig(preset="tiny", schemes=["rope"], patterns=["causal"], lengths=[16, 32], steps=4,
                          data=str(data_dir), eval_docs=docs, resolution_texts=1, extension=False, retrieval=False)
        return Study(cfg, tmp_path / f"s{docs}", progress=False, echo=None).estimate(timer=StubTimer(1.0, 1.0))

    s = study(data_dir, tmp_path / "s")
    available = len(select_documents(s.plan.corpus.valid, 32))
    asked, exact = planned(10**8), planned(available)
    assert asked["eval_docs"] == exact["eval_docs"] == available >= 1
    assert asked["total_s"] == exact["total_s"] < 10**3  # each document's evaluation timed at 1 s
