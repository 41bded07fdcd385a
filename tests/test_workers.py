"""A study's work over worker processes: the schedule (the critical path, not the sum over workers),
the ETA, units run in worker processes (a spawned one, as a study starts them, and forked ones) in the
order their needs allow, a killed worker named and the work resumed, a study with two workers writing
the serial study's results number for number, and a second study in the same directory refused while
one runs."""

from __future__ import annotations

import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import safety_net
from lexkit.core import lock
from lexkit.study import Study, StudyConfig, workers
from lexkit.study.schedule import Task, levels, schedule
from toy_corpus import STUDY_DOCS, write_corpus
from toy_work import ToyWork


# -- the schedule ----------------------------------------------------------------------------------------
def test_the_schedule_is_the_critical_path_not_the_sum_over_workers():
    """A 10 s run that a 10 s scoring waits for, beside a 2 s task: 20 s on two workers (not 22 / 2),
    22 s on one; each task starts when a worker is free and what it needs has finished."""
    tasks = [Task("run", 10.0), Task("score", 10.0, ("run",)), Task("other", 2.0)]
    assert levels(tasks) == {"run": 20.0, "score": 10.0, "other": 2.0}
    two = schedule(tasks, 2)
    assert two.makespan == 20.0 and two.start == {"run": 0.0, "other": 0.0, "score": 10.0}
    assert schedule(tasks, 1).makespan == 22.0 and schedule(tasks, 1).order() == ["run", "score", "other"]
    # the longest chain first: with one worker free the 6 s chain goes before a lone 5 s task
    chain = [Task("a", 1.0), Task("b", 5.0, ("a",)), Task("lone", 5.0)]
    assert schedule(chain, 1).order() == ["a", "b", "lone"]
    # by hand: A 10 -> B 2; C 6; D 6 on two workers: A | C then D at 6, B at 10: 12 s
    four = schedule([Task("A", 10), Task("B", 2, ("A",)), Task("C", 6), Task("D", 6)], 2)
    assert (four.start["D"], four.start["B"], four.makespan) == (6.0, 10.0, 12.0)
    # what is running keeps a worker; a need outside the tasks counts as done
    assert schedule([Task("B", 2, ("A",)), Task("C", 6)], 2, running={"A": 3.0}).makespan == 6.0
    with pytest.raises(ValueError, match="need each other: x -> y -> x"):
        schedule([Task("x", 1, ("y",)), Task("y", 1, ("x",))], 2)
    with pytest.raises(ValueError, match="at least 1"):
        schedule(tasks, 0)


def test_the_eta_scales_the_estimates_by_what_the_finished_units_took():
    """Two units done in twice their estimate: what is left is scheduled at twice its estimate."""
    tracker = workers.Tracker({"a": 10.0, "b": 10.0, "c": 30.0, "d": 30.0}, {"a": (), "b": (), "c": (), "d": ("c",)},
                              workers=2)
    tracker.finished.update(a=20.0, b=20.0)
    assert tracker.ratio() == 2.0
    share, text, doing = tracker.state(now=0.0)
    assert share == pytest.approx(20 / 80) and text == "2/4 units  eta 2:00" and doing == ""  # c, d: 2 x (30 + 30) s
    tracker.running["c"] = 0.0  # c started 30 s ago: 30 s of its 60 left, then d's 60
    share, text, doing = tracker.state(now=30.0)
    assert text == "2/4 units  eta 1:30" and doing == "c" and share == pytest.approx((20 + 0.95 * 15) / 80)
    assert workers.clock(3725) == "1:02:05" and workers.clock(65) == "1:05"


def test_the_eta_grows_while_a_unit_overruns_instead_of_freezing_then_jumping():
    """A unit past its estimate counts as done at what it has taken so far: at 25 s into a 10 s
    estimate the ratio is 2.5, so b (10 s) and c (30 s) are put at 25 s and 75 s; before, the
    running unit's time left was clamped at 0 and the ratio moved only when a unit finished, so the
    ETA read 0:30 from 10 s on whatever the clock, then jumped."""
    tracker = workers.Tracker({"a": 10.0, "b": 10.0, "c": 30.0}, {"a": (), "b": (), "c": ()}, workers=2)
    tracker.running["a"] = 0.0
    assert tracker.state(now=5.0)[1] == "0/3 units  eta 0:30"  # on time: a's 5 s left then b, beside c's 30 s
    assert tracker.ratio(now=25.0) == 2.5 and tracker.state(now=25.0)[1] == "0/3 units  eta 1:15"
    etas = [tracker.state(now=float(t))[1] for t in (12, 16, 20, 24)]
    assert len(set(etas)) == 4  # it moves every second of the overrun
    tracker.finished["a"], tracker.running = 25.0, {}  # a done at 25 s: the same ratio, no jump
    assert tracker.state(now=25.0)[1] == "1/3 units  eta 1:15"


def render_watch(terminal: bool, width: int = 80, seconds: float = 0.0) -> str:
    import io

    from rich.console import Console

    from lexkit.core import progress

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=terminal, color_system=None)
    labels = "train rope@window:16+shift;none@causal+logn+shift+kshift + mix, seed 0, score hwfa:W=16,shift=0.5, seed 1"
    with progress.watch("study", lambda: (0.3, "3/40 units  eta 3:30", labels), console=console, every=0.01):
        time.sleep(seconds)
    return buffer.getvalue()


def test_the_bar_keeps_its_percent_clock_and_eta_on_an_80_column_line_and_a_log_gets_plain_lines():
    """The running units' labels pushed the bar, the percent and the clock off an 80-column line; a
    log that is not a terminal (CI, nohup) showed nothing until the study ended."""
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", render_watch(True))  # the cursor's and the line's escapes
    last = [line for line in shown.replace("\r", "\n").splitlines() if line.strip()][-1]
    assert len(last) <= 80 and "30%" in last and "eta 3:30" in last and last.rstrip().endswith("…"), last
    assert "train rope@" in last
    log = render_watch(False, seconds=0.05).splitlines()
    assert log[0] == "study  30% 0:00:00 3/40 units  eta 3:30  train rope@window:16+shift;none@causal+logn+shift" \
                     "+kshift + mix, seed 0, score hwfa:W=16,shift=0.5, seed 1"
    assert len(log) == 2 and log[1] == log[0]  # the start and the end: the share did not move, nor a minute pass


# -- the workers -----------------------------------------------------------------------------------------
def test_units_run_in_workers_and_a_killed_worker_is_named_and_resumed(tmp_path, monkeypatch):
    """Units run in worker processes (not this one), each after what it needs, their records
    joining the parent's; a worker SIGKILLed mid-unit stops the run with one message naming the unit
    and the signal, and a second run does what is left (what was done read here, not redone). The
    workers fork here (the same protocol, started in milliseconds); what a spawned worker receives
    beyond a forked one, its build, crosses a pickle; the slow test below spawns one, as a study does."""
    assert workers.START_METHOD == "spawn"
    build = pickle.loads(pickle.dumps(workers.Build(ToyWork, (tmp_path, True))))
    assert [u.name for u in build.make(*build.args, **build.kwargs).units()] == ["a", "b", "c", "die"]
    monkeypatch.setattr(workers, "START_METHOD", "fork")
    out = tmp_path / "work"
    out.mkdir()
    work = ToyWork(out, True)
    parent = work.cache  # the parent's record: the workers' join it
    build = workers.Build(ToyWork, (out, True))
    with pytest.raises(workers.WorkerError, match=r"killed by SIGKILL while running toy die; .*run it again"):
        workers.run(work.units(), jobs=2, build=build, cache=parent)
    assert {"a", "b", "c", "die.marker"} <= {p.name for p in out.iterdir()} and not (out / "die").exists()
    assert (out / "b").read_text() == (out / "a").read_text() + " then b"  # b ran after a
    ran = {r["name"]: r["pid"] for r in parent.record}
    assert set(ran) == {"a", "b", "c"} and os.getpid() not in ran.values()
    assert {r["action"] for r in parent.record} == {"ran"}
    before = {name: (out / name).read_text() for name in "abc"}
    del parent.record[:]
    workers.run(work.units(), jobs=1, build=build, cache=parent)  # one process: what is left of it
    assert (out / "die").read_text() == "survived" and {name: (out / name).read_text() for name in "abc"} == before
    assert [(r["name"], r["action"]) for r in parent.record] == [
        ("a", "cached"), ("b", "cached"), ("c", "cached"), ("die", "ran")]


@pytest.mark.slow  # fast sibling: test_units_run_in_workers_and_a_killed_worker_is_named_and_resumed (forked)
def test_a_unit_runs_in_a_spawned_worker(tmp_path):
    """(About 4 s: a fresh interpreter imports torch.) A unit runs in a spawned worker, as a study
    starts them: its record joins the parent's, its file is written by that process."""
    work = ToyWork(tmp_path)
    workers.run(work.units()[2:], jobs=2, build=workers.Build(ToyWork, (tmp_path,)), cache=work.cache)  # c alone
    (record,) = work.cache.record
    assert (record["name"], record["action"]) == ("c", "ran") and record["pid"] != os.getpid()
    assert (tmp_path / "c").read_text() == f"c {record['pid']}" and not (tmp_path / "a").exists()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("data"), STUDY_DOCS)


def tiny(data_dir, **more):
    """A tiny study with every kind of unit: two cells, table E's methods and fine-tunes, table G's
    runs on two seeds and their scoring (table E's methods on its rope row left out: the grid's
    are there)."""
    settings = dict(preset="tiny", schemes=["alibi", "rope"], patterns=["causal"], lengths=[16, 32], steps=4,
                    data=str(data_dir), eval_docs=1, resolution_texts=1, extension_steps=2, retrieval_steps=3,
                    retrieval_samples=1, retrieval_seeds=2, retrieval_methods=False)
    return StudyConfig(**(settings | more))


def masked(path: Path, root: Path) -> str:
    return safety_net.normalize("results.json", path.read_text(), root)


def numbers(out: Path) -> dict:
    """A study's results.json, timings and directories masked, without what its invocations did (``work``,
    ``invocations``: a resumed or second study reads what was cached where the first ran it)."""
    return {k: v for k, v in json.loads(masked(out / "results.json", out)).items() if k not in ("work", "invocations")}


def test_two_workers_write_what_one_process_writes_number_for_number(tmp_path, data_dir, no_figures, monkeypatch):
    """The fast sibling of the safety net's study over two workers: a study of one grid cell and one
    seed of table G and its scoring (its methods left out), run in this process and over two workers
    at one thread each, writes the same results.json (timings, directories and the work done masked);
    each run trained once. The workers fork here (started in milliseconds; the spawned one is the
    toy workers' test above's, and the slow tests below spawn theirs): the same protocol, units and cache."""
    monkeypatch.setattr(workers, "START_METHOD", "fork")
    cfg = tiny(data_dir, schemes=["alibi"], lengths=[16], retrieval_seeds=1, extension=False)

    Study(cfg, tmp_path / "one", progress=False, echo=None, jobs=1).run()
    two = Study(cfg, tmp_path / "two", progress=False, echo=None, jobs=2)
    two.run()
    assert numbers(tmp_path / "two") == numbers(tmp_path / "one")
    trained = [e["name"] for e in two.record if e["task"] == "train"]
    assert len(trained) == len(set(trained)) == 2  # the cell and table G's run


@pytest.mark.slow  # fast sibling: test_two_workers_write_what_one_process_writes_number_for_number
def test_two_workers_write_the_serial_studys_results_number_for_number(tmp_path, no_figures):
    """The safety net's tiny study (every table: the grid, E's methods and fine-tunes, G's runs, its
    methods and fine-tunes, on two seeds) over two workers at one thread each: results.json is the
    fixture's, written by one process at one thread, number for number (timings and directories
    masked); each run trained once; the work the workers did is the parent's record."""
    data = write_corpus(tmp_path / "data", STUDY_DOCS)
    study = Study(safety_net.study_config(data), tmp_path / "study", progress=False, echo=None, jobs=2)
    study.run()
    assert masked(tmp_path / "study" / "results.json", tmp_path) == (safety_net.HERE / "results.json").read_text()
    log = [json.loads(line) for line in (tmp_path / "study" / "log.jsonl").read_text().splitlines()]
    trained = [e["name"] for e in log if e["task"] == "train"]
    assert len(trained) == len(set(trained)) == 2 + 3 + 4 + 3  # cells, E's fine-tunes, G's 2 x 2 runs and 3 fine-tunes
    assert sorted((e["task"], e["action"]) for e in study.record) == sorted(
        (e["task"], e["action"]) for e in log) and {e["action"] for e in log} == {"ran"}
    again = Study(safety_net.study_config(data), tmp_path / "study", progress=False, echo=None, jobs=2)
    again.run()  # everything cached: read here, no worker started
    assert {e["action"] for e in again.record} == {"cached"}


@pytest.mark.slow  # fast sibling: tests/test_study.py's one writer of a study directory (in process)
def test_a_second_study_in_the_same_directory_is_refused_while_one_runs(tmp_path, data_dir):
    """(About 10 s: three processes start.) A study with workers holds its directory: a second
    ``lexkit study`` there exits 2 with one line naming the first; the first goes on and trains
    each run once."""
    out = tmp_path / "study"
    argv = ["study", "--preset", "tiny", "--scheme", "alibi", "--pattern", "causal", "--lengths", "16,32",
            "--steps", "300", "--data", str(data_dir), "--eval-docs", "1", "--no-extension", "--no-retrieval",
            "--out", str(out), "--quiet", "--jobs", "2"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    first = subprocess.Popen([sys.executable, "-m", "lexkit", *argv], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while not lock.is_locked(out) and first.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert lock.is_locked(out), first.stderr.read().decode() if first.poll() is not None else "no lock"
        second = subprocess.run([sys.executable, "-m", "lexkit", *argv], env=env, capture_output=True, text=True)
        lines = second.stderr.strip().splitlines()
        assert second.returncode == 2 and lines == [
            f"error: {out} is being written by process {first.pid}; wait for it to finish or stop it"]
        assert first.wait(timeout=300) == 0, first.stderr.read().decode()
    finally:
        if first.poll() is None:
            first.kill()
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [e["action"] for e in log if e["task"] == "train"] == ["ran"]


@pytest.mark.slow  # fast siblings: the toy workers' SIGKILL above, and the trainer's resume tests
def test_a_study_whose_worker_is_killed_mid_run_resumes_to_the_same_results(tmp_path, data_dir, no_figures):
    """(About a minute.) A worker SIGKILLed while it trains one of table G's runs (after a
    checkpoint): the study stops naming the run; run again, it continues that run from its checkpoint
    and writes the results of a study that never stopped."""
    cfg = dict(retrieval_steps=200)
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    Study(tiny(data_dir, **cfg), whole, progress=False, echo=None, jobs=1).run()
    import threading

    failure = {}

    def run():
        try:
            Study(tiny(data_dir, **cfg), killed, progress=False, echo=None, jobs=2).run()
        except workers.WorkerError as exc:
            failure["error"] = str(exc)

    thread = threading.Thread(target=run)
    thread.start()
    from lexkit.training import runs

    deadline, victim = time.time() + 300, None
    while victim is None and time.time() < deadline and thread.is_alive():
        for run_dir in (killed / "runs").glob("mix-*"):
            state = runs.trainer_state(run_dir) if (run_dir / runs.CHECKPOINT).is_file() else None
            if state and 0 < state["step"] < 200 and lock.holder(run_dir):
                victim = (run_dir, lock.holder(run_dir))
                break
        time.sleep(0.02)
    assert victim is not None, "no run of table G was caught between checkpoints"
    os.kill(victim[1], signal.SIGKILL)
    thread.join(timeout=300)
    assert "killed by SIGKILL while running" in failure["error"] and "+ mix" in failure["error"]
    step = runs.trainer_state(victim[0])["step"]
    assert 0 < step < 200
    Study(tiny(data_dir, **cfg), killed, progress=False, echo=None, jobs=2).run()

    assert numbers(killed) == numbers(whole)
