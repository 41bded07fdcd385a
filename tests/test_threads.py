"""lexkit.core.threads: the CPU threads policy as a pure function, the probe of other processes'
CPU time, and the commands that follow it (docs/threads.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch

from lexkit.cli import main
from lexkit.core import threads
from lexkit.core.threads import choose

NOTHING: dict[str, str] = {}


@pytest.mark.parametrize("cores, busy, env, asked, want", [
    (2, 2.0, {"LEXKIT_THREADS": "3", "OMP_NUM_THREADS": "1"}, 2, (2, "--threads")),  # the flag first
    (8, 7.0, {"LEXKIT_THREADS": " 3 ", "OMP_NUM_THREADS": "1"}, None, (3, "LEXKIT_THREADS")),  # then the variable
    (8, 7.0, {"LEXKIT_THREADS": "", "OMP_NUM_THREADS": "1"}, None, (None, "OMP_NUM_THREADS")),  # torchrun's
    (2, None, NOTHING, None, (None, "idle")),  # nothing known: torch's own choice
    (2, 0.4, NOTHING, None, (None, "idle")),  # under half a core
    (2, 0.6, NOTHING, None, (1, "busy")),  # 1.4 free cores: 1
    (2, 2.0, NOTHING, None, (1, "busy")),  # another job on every core: at least 1
    (2, 3.7, NOTHING, None, (1, "busy")),
    (16, 4.2, NOTHING, None, (12, "busy")),  # 11.8 free cores: 12
    (16, 0.5, NOTHING, None, (None, "idle")),  # 15.5 rounds to every core
])
def test_the_policy(cores, busy, env, asked, want):
    got = choose(cores, busy, env, asked)
    assert (got.threads, got.source) == want
    assert (got.warning is not None) == (got.source == "busy" or (got.threads or 0) > cores)


@pytest.mark.parametrize("env, asked, given", [
    (NOTHING, 64, "--threads 64"), ({"LEXKIT_THREADS": "3"}, None, "LEXKIT_THREADS=3")])
def test_more_threads_than_cores_run_with_one_warning(env, asked, given):
    """Asked for (the flag or the variable), more threads than cores run as asked, with one warning
    naming the count, the cores and what would be faster; at the cores, no warning."""
    got = choose(2, None, env, asked)
    assert got.threads == int(given.split()[-1].split("=")[-1])
    assert got.warning == (f"{given} is more threads than the 2 cores this process may run on: running {got.threads} "
                           "all the same, but threads past the cores wait on each other at every parallel region "
                           "(docs/threads.md); 2 or fewer is faster")
    assert choose(1, None, NOTHING, 2).warning.startswith("--threads 2 is more threads than the 1 core this")
    assert choose(2, 2.0, NOTHING, 2).warning is None and choose(2, None, {"LEXKIT_THREADS": "2"}).warning is None


def test_the_warning_says_how_many_and_how_to_choose():
    warning = choose(2, 2.04, NOTHING).warning
    assert warning.startswith("other processes keep 2.0 of this machine's 2 cores busy: running 1 thread instead "
                              "of 2") and "--threads N or LEXKIT_THREADS=N" in warning and "\n" not in warning


@pytest.mark.parametrize("text", ["0", "-1", "two", "1.5", "5000"])
def test_a_bad_lexkit_threads_is_refused_by_name(text):
    with pytest.raises(ValueError, match=f"LEXKIT_THREADS='{text}': expected a number of threads from 1 to 4096"):
        choose(2, None, {"LEXKIT_THREADS": text})


def test_a_bad_threads_flag_is_refused_by_name():
    with pytest.raises(ValueError, match=r"--threads must be a positive integer \(at most 4,096\), got 0"):
        choose(2, None, NOTHING, 0)


def test_the_probe_sees_a_busy_process():
    """A process spinning on one core while the probe watches: at least half a core busy."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and threads.cpu_times().get(spinner.pid, 0) < 5:
            time.sleep(0.02)  # until it is past its start and spinning
        probe = threads.Probe()
        time.sleep(0.3)
        assert probe.busy() >= 0.5
        assert os.getpid() not in threads.cpu_times()  # never this process itself
    finally:
        spinner.kill()
        spinner.wait()


def test_commands_follow_the_policy(monkeypatch, capsys):
    """LEXKIT_THREADS sets a command's threads; without it and OMP_NUM_THREADS, other busy processes
    lower them with one warning line; a bad value is one error line."""
    argv = ["resolution", "--scheme", "rope", "--lengths", "64"]
    monkeypatch.setenv("LEXKIT_THREADS", "2")
    assert main(argv) == 0 and torch.get_num_threads() == 2
    assert "warning" not in capsys.readouterr().err

    monkeypatch.delenv("LEXKIT_THREADS")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "cores", lambda: 2)
    monkeypatch.setattr(threads.Probe, "busy", lambda self: 2.0)
    assert main(argv) == 0 and torch.get_num_threads() == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ["warning: " + choose(2, 2.0, NOTHING).warning]

    monkeypatch.setenv("LEXKIT_THREADS", "lots")
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: LEXKIT_THREADS='lots': expected a number of threads")


def test_a_command_reads_other_processes_only_when_its_count_is_not_fixed(monkeypatch):
    """The probe (every process's /proc/PID/stat, a few ms) is made at a command's start only where
    the environment leaves the choice open: LEXKIT_THREADS or OMP_NUM_THREADS (even a bad value,
    refused later by name) means none."""
    made = []
    monkeypatch.setattr(threads.Probe, "__init__", lambda self: made.append(1) or setattr(self, "first", None))
    monkeypatch.setattr(threads.Probe, "busy", lambda self: 0.0)
    for env, probes in [({"LEXKIT_THREADS": "1"}, 0), ({"OMP_NUM_THREADS": "2"}, 0), ({"LEXKIT_THREADS": "x"}, 0),
                        ({"LEXKIT_THREADS": " "}, 1), ({}, 1)]:
        monkeypatch.delenv("LEXKIT_THREADS", raising=False)
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        del made[:]
        assert main(["resolution", "--scheme", "rope", "--lengths", "64"]) == (2 if env.get("LEXKIT_THREADS") == "x"
                                                                               else 0)
        assert len(made) == probes, env
