"""Bad input to lexkit's commands: every one answered in one line.

Each test reproduces one case found by trying lexkit as a demanding user and as an adversary
(bad settings, NaN models, tracebacks, misleading messages, lost output, relative and moved
corpora, an unknown command) and checks the command's behaviour: one ``error:`` line, exit 2,
nothing written or lost. The cases about run directories (two writers, resume over finished
weights, corrupt or foreign weights, modes) are in test_lock.py and test_runs.py.
"""

import io
import json
import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
import torch

from cli_checks import one_error_line, snapshot
from lexkit import positions
from lexkit.cli import main
from lexkit.training import runs
from toy_corpus import DOCS, TINY, write_corpus

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _train(out: Path, data: Path, scheme: str = "alibi", *extra: str) -> None:
    assert main(["train", "--scheme", scheme, "--out", str(out), "--data", str(data), *TINY, *extra]) == 0


# -- checks before the directory (lexkit.core.lock: test_lock.py; lexkit.training.runs: test_runs.py) -----------
@pytest.mark.parametrize("argv, message", [
    (["--lr", "inf"], "lr must be a finite number > 0 (at most 10), got inf"),
    (["--lr", "nan"], "lr must be a finite number > 0 (at most 10), got nan"),
    (["--train-len", "60000"], "fewer than one window of 60001"),
    (["--train-len", "100000"], "train_len must be a positive integer (at most 65,536), got 100000"),
    (["--steps", str(10**12)], "steps must be a positive integer (at most 2,147,483,648), got 1000000000000"),
    (["--scheme", "xpos:gamma=inf"], "parameter gamma=inf is not a finite number"),
    (["--scheme", "rope:base=inf"], "parameter base=inf is not a finite number"),
])
def test_bad_settings_fail_before_the_directory_exists(trained, tmp_path, capsys, argv, message):
    out = tmp_path / "new"
    args = ["train", "--scheme", "rope", "--out", str(out), "--data", str(trained / "data"), *TINY, *argv]
    assert main(args) == 2  # a second --scheme replaces the first
    assert message in one_error_line(capsys)
    assert not out.exists()


def test_nan_at_the_first_step_claims_no_checkpoint(trained, tmp_path, capsys, monkeypatch):
    import lexkit.training.loop as T

    monkeypatch.setattr(T, "lr_at", lambda step, cfg: float("nan"))
    out = tmp_path / "nan"
    monkeypatch.setattr(T.F, "cross_entropy", lambda *a, **k: torch.tensor(float("nan"), requires_grad=True))
    assert main(["train", "--scheme", "rope", "--out", str(out), "--data", str(trained / "data"), *TINY]) == 2
    line = one_error_line(capsys)
    assert "no checkpoint was written yet" in line and "checkpoint (step 0)" not in line


def test_unwritable_out_is_one_line(trained, tmp_path, capsys, monkeypatch):
    """A read-only parent (simulated: the tests may run as root, which writes anyway)."""
    parent = tmp_path / "ro"
    parent.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == parent else real(p, mode))
    argv = ["train", "--scheme", "rope", "--out", str(parent / "run"), "--data", str(trained / "data"), *TINY]
    assert main(argv) == 2
    assert f"{parent} is not writable" in one_error_line(capsys)
    assert not (parent / "run").exists()


def test_os_errors_nobody_foresaw_are_one_line(run, capsys, monkeypatch):
    def denied(*a, **k):
        raise PermissionError(13, "Permission denied", str(run / "metrics.jsonl"))

    monkeypatch.setattr("lexkit.training.runs.RunDir.truncate_metrics", denied)
    assert main(["train", "--resume", "--out", str(run), "--steps", "18", "--quiet"]) == 2
    assert one_error_line(capsys) == f"error: {run / 'metrics.jsonl'}: Permission denied"


# -- 4. non-finite is an error --------------------------------------------------------------------
@pytest.fixture
def nan_run(run):
    model, _ = runs.load(run)
    with torch.no_grad():
        next(model.parameters()).fill_(float("nan"))
    runs.save_weights(run, model)  # a valid file (hash and all) of a broken model
    return run


def test_nan_model_fails_eval_sample_and_resolution(nan_run, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["eval", str(nan_run), "--lengths", "16,32", "--json", str(out)]) == 2
    assert "non-finite loss" in one_error_line(capsys) and not out.exists()
    assert main(["sample", str(nan_run), "--bytes", "4", "--seed", "0"]) == 2
    assert "not finite" in one_error_line(capsys)
    assert main(["resolution", str(nan_run), "--lengths", "16", "--texts", "1", "--json", str(out)]) == 2
    assert "not finite" in one_error_line(capsys) and not out.exists()


# -- 5. every listed case: one line, nothing written -----------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["resolution", "--scheme", "rope", "--lengths", "1000000"], "length 1,000,000 is above the maximum 65,536"),
    (["resolution", "--scheme", "rope", "--heads", "1000", "--head-dim", "1000"], "at most 4096"),
    (["resolution", "--scheme", "rope", "--pattern", "window:10000000000000000000000"],
     "W=10000000000000000000000 is out of range"),
    (["eval", "RUN", "--pattern", "window:10000000000000000000000"], "out of range"),
    (["eval", "RUN", "--lengths", str(2**21)], "above the maximum 1,048,576"),
    (["eval", "RUN", "--data", "/dev/null"], "/dev/null' is not a regular file or a directory"),
    (["sample", "RUN", "--bytes", str(10**9)], "--bytes must be an integer >= 0 (at most 65,536), got 1000000000"),
    (["sample", "RUN", "--temperature", "inf"], "temperature must be >= 0 and finite"),
    (["resolution", "--scheme", "rope", "--json", "TMP"], "is a directory"),
    (["resolution", "--scheme", "rope", "--json", "TMP/no/such.json"], "does not exist"),
    (["resolution", "--scheme", "rope", "--plot", "TMP"], "is a directory"),
    (["eval", "RUN", "--json", "TMP"], "is a directory"),
])
def test_listed_bad_inputs_are_one_line(run, tmp_path, capsys, argv, message):
    argv = [a.replace("RUN", str(run)).replace("TMP", str(tmp_path)) for a in argv]
    before = snapshot(tmp_path)
    assert main(argv) == 2
    assert message in one_error_line(capsys)
    assert snapshot(tmp_path) == before


def test_import_failures_name_the_module(tmp_path, capsys, monkeypatch):
    (tmp_path / "raiser.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "quitter.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["schemes", "--import", "raiser"]) == 2
    assert one_error_line(capsys) == "error: --import raiser: cannot import it (RuntimeError: boom at import)"
    assert main(["schemes", "--import", "broken"]) == 2
    line = one_error_line(capsys)
    assert line.startswith("error: --import broken: syntax error in ") and "broken.py, line 1" in line
    assert main(["schemes", "--import", "quitter"]) == 2
    assert "--import quitter: the module called exit(3)" in one_error_line(capsys)
    assert main(["schemes", "--import", "no_such_module_here"]) == 2
    assert "--import no_such_module_here" in one_error_line(capsys)


def test_overriding_a_builtin_scheme_warns_and_taking_its_name_fails(tmp_path, capsys, monkeypatch):
    (tmp_path / "shadow.py").write_text(textwrap.dedent("""
        from lexkit import positions
        base = positions.get("rope")
        positions.register(type("Shadow", (base,), {"name": "rope"}), replace=True)
    """))
    (tmp_path / "clash.py").write_text(textwrap.dedent("""
        from lexkit import positions
        positions.register(type("Clash", (positions.get("rope"),), {"name": "rope"}))
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    original = positions.get("rope")
    try:
        assert main(["schemes", "--import", "shadow"]) == 0
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            positions.register(original, replace=True)
        sys.modules.pop("shadow", None)
    err = capsys.readouterr().err.strip().splitlines()
    where = f"{original.__module__}.{original.__qualname__}"
    assert err == [f"warning: position scheme 'rope' ({where}) is replaced by shadow.Shadow"]
    assert main(["schemes", "--import", "clash"]) == 2
    line = one_error_line(capsys)
    assert line.startswith("error: --import clash: cannot import it (ValueError: position scheme 'rope' is already "
                           "registered")
    assert positions.get("rope") is original


def test_outputs_are_written_before_a_closed_pipe_stops_the_printing(run, tmp_path, monkeypatch):
    """In-process sibling of the `| head -1` test: stdout refuses every write as a closed pipe does;
    the command still writes its JSON and CSV and exits 0."""

    class ClosedPipe(io.TextIOBase):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    j, c = tmp_path / "F.json", tmp_path / "G.csv"
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(["eval", str(run), "--lengths", "8,16", "--json", str(j), "--csv", str(c), "--no-progress"]) == 0
    monkeypatch.undo()
    assert json.loads(j.read_text())["lengths"] == [8, 16] and c.read_text().startswith("length,")


@pytest.mark.slow  # fast sibling: test_outputs_are_written_before_a_closed_pipe_stops_the_printing
def test_outputs_survive_a_closed_pipe(run, tmp_path):
    j, c = tmp_path / "F.json", tmp_path / "G.csv"
    env = {**os.environ, "PYTHONPATH": SRC}
    cmd = f"{sys.executable} -m lexkit eval {run} --lengths 8,16 --json {j} --csv {c} | head -1; " \
          "exit ${PIPESTATUS[0]}"
    done = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(j.read_text())["lengths"] == [8, 16] and c.read_text().startswith("length,")


# -- 6. recorded paths: absolute, and a moved corpus ----------------------------------------------
def test_data_paths_are_recorded_absolute_and_a_moved_corpus_is_found(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_corpus(tmp_path / "corpus")
    _train(Path("r"), Path("corpus"), "alibi", "--steps", "4", "--save-every", "4", "--eval-every", "4")  # a short run
    config = runs.read_config("r")
    assert config["data"]["spec"] == config["train"]["data"] == str(tmp_path / "corpus")
    assert main(["eval", "r", "--lengths", "16", "--json", "before.json"]) == 0
    (tmp_path / "corpus").rename(tmp_path / "moved")
    assert main(["eval", "r", "--lengths", "16"]) == 2
    line = one_error_line(capsys)
    assert "recorded in r/config.json does not exist here" in line and "--data PATH" in line
    assert main(["eval", "r", "--lengths", "16", "--data", "moved", "--json", "after.json"]) == 0
    before, after = json.loads(Path("before.json").read_text()), json.loads(Path("after.json").read_text())
    assert after["results"] == before["results"] and after["data"]["split"] == "validation"
    assert main(["train", "--resume", "--out", "r", "--quiet"]) == 2  # finished, but its corpus is gone
    assert "--data PATH" in one_error_line(capsys)
    assert main(["train", "--resume", "--out", "r", "--steps", "6", "--data", "moved", "--quiet"]) == 0
    assert runs.read_config("r")["data"]["spec"] == str(tmp_path / "moved")
    write_corpus(tmp_path / "other", DOCS[:20])
    assert main(["train", "--resume", "--out", "r", "--steps", "8", "--data", "other", "--quiet"]) == 2
    assert "is not the one r trained on" in one_error_line(capsys)


# -- devices, hub ----------------------------------------------------------------------------------
def test_study_checks_the_device_first(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    start = time.perf_counter()
    assert main(["study", "--device", "cuda", "--dry-run", "--out", str(tmp_path / "s"), "--preset", "tiny"]) == 2
    assert "no CUDA device" in one_error_line(capsys)
    assert time.perf_counter() - start < 5 and not (tmp_path / "s").exists()


@pytest.mark.xdist_group("hf")  # beside test_hf.py under `pytest -n`: one worker imports the HF stack
def test_hf_data_without_network_fails_fast_and_quietly(monkeypatch, capsys):
    pytest.importorskip("datasets")
    import lexkit.data.corpus as D

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(D, "hub_reachable", lambda timeout=1.0: False)
    start = time.perf_counter()
    assert main(["train", "--scheme", "rope", "--out", "unused-run", "--data", "hf:nobody/no-such-dataset",
                 "--preset", "tiny"]) == 2
    assert time.perf_counter() - start < 10
    assert "cannot load 'hf:nobody/no-such-dataset'" in one_error_line(capsys)
    assert os.environ["HF_HUB_OFFLINE"] == "1"  # restored by monkeypatch


# -- the command itself ------------------------------------------------------------------------------
def test_unknown_command_exits_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2
    assert capsys.readouterr().err.startswith("error:")
