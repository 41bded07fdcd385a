"""lexkit.core.lock: one writer per directory. A second writer is refused naming the holder and changes
nothing; a lock left by a killed process is stale and taken over; an interrupted writer releases it."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_checks import one_error_line, snapshot
from lexkit.cli import main
from lexkit.core import lock
from lexkit.training import runs
from lock_holder import Holder
from stop import stop_at
from toy_corpus import TINY, write_corpus

SRC = str(Path(__file__).resolve().parents[1] / "src")


def test_lock_probe_and_release(tmp_path):
    assert not lock.is_locked(tmp_path) and lock.holder(tmp_path) is None
    with lock.hold(tmp_path / "new"):
        assert lock.is_locked(tmp_path / "new") and lock.holder(tmp_path / "new") == os.getpid()
        with pytest.raises(lock.LockedError, match=f"being written by process {os.getpid()}"):
            lock.acquire(tmp_path / "new")  # flock conflicts between two open files, even in one process
    assert not (tmp_path / "new" / ".lock").exists()


def test_second_writer_is_refused_and_changes_nothing(run, capsys):
    before = snapshot(run)
    holder = Holder(run)
    try:
        code = main(["train", "--resume", "--out", str(run), "--steps", "18", "--quiet"])
        line = one_error_line(capsys)
        assert code == 2 and f"{run} is being written by process {holder.pid}" in line
        assert lock.is_locked(run) and lock.holder(run) == holder.pid
        empty = run.parent / "fresh"
        empty.mkdir()
        holder2 = Holder(empty)
        try:
            assert main(["train", "--scheme", "rope", "--out", str(empty), *TINY]) == 2
            assert f"being written by process {holder2.pid}" in one_error_line(capsys)
            assert [p.name for p in empty.iterdir()] == [".lock"]
        finally:
            holder2.kill()
            holder2.wait()
    finally:
        holder.kill()  # SIGKILL: the lock file stays behind, naming a dead process
        holder.wait()
    assert snapshot(run) == {**before, ".lock": snapshot(run)[".lock"]}
    assert lock.holder(run) == holder.pid and not lock.is_locked(run)  # stale
    assert main(["train", "--resume", "--out", str(run), "--steps", "18", "--quiet"]) == 0  # recovered
    assert not (run / ".lock").exists() and runs.trainer_state(run)["step"] == 18


@pytest.mark.slow  # fast sibling: test_second_writer_is_refused_and_changes_nothing
def test_two_trains_started_together_leave_one_consistent_run(tmp_path):
    data = write_corpus(tmp_path / "data")
    out = tmp_path / "D"
    env = {**os.environ, "PYTHONPATH": SRC}
    procs = {s: subprocess.Popen([sys.executable, "-m", "lexkit", "train", "--scheme", s, "--out", str(out),
                                  "--data", str(data), *TINY], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=env) for s in ("rope", "alibi")}
    done = {s: (p.wait(120), p.stderr.read()) for s, p in procs.items()}
    codes = sorted(code for code, _ in done.values())
    assert codes == [0, 2], done
    loser = next(err for code, err in done.values() if code == 2)
    assert loser.startswith("error: ") and ("being written by process" in loser or "not empty" in loser), loser
    winner = next(s for s, (code, _) in done.items() if code == 0)
    model, config = runs.load(out)  # weights verified against config.json
    assert config["model"]["scheme"] == winner
    assert [r["step"] for r in runs.read_metrics(out)] == [6, 10, 12]  # one writer's rows, once each


def test_interrupt_releases_the_lock_and_keeps_the_checkpoint(trained, tmp_path, capsys, monkeypatch):
    """In-process sibling of the SIGINT test: KeyboardInterrupt at step 9 (after the step-6
    checkpoint) exits 130 and leaves no lock."""
    stop_at(monkeypatch, 8)
    out = tmp_path / "int"
    assert main(["train", "--scheme", "rope", "--out", str(out), "--data", str(trained / "data"), *TINY]) == 130
    assert one_error_line(capsys) == "error: interrupted"
    assert not (out / ".lock").exists() and runs.trainer_state(out)["step"] == 6


@pytest.mark.slow  # fast sibling: test_interrupt_releases_the_lock_and_keeps_the_checkpoint
def test_sigint_keeps_the_lock_released(trained, tmp_path):
    """SIGINT during training: exit 130, a usable run, and no lock left held."""
    out = tmp_path / "int"
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen([sys.executable, "-m", "lexkit", "train", "--scheme", "rope", "--out", str(out),
                             "--data", str(trained / "data"), "--preset", "tiny", "--steps", "100000",
                             "--save-every", "5", "--quiet", "--threads", "1"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (out / runs.CHECKPOINT).exists() and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 130 and proc.stderr.read().strip() == "error: interrupted"
    assert not (out / ".lock").exists() and runs.trainer_state(out)["step"] >= 5
