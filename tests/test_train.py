"""Training runs: the schedule, run directory, atomic checkpoints, byte-identical resume after
SIGKILL, refusals, NaN stop, and the bad-input contract of `lexkit train`."""

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from lexkit import runs
from lexkit.cli import main
from lexkit.data import Corpus
from lexkit.errors import RunError
from lexkit.train import TrainConfig, TrainError, configs, lr_at, train

DOCS = [(f"def f{i}(x):\n    return x * {i} + {i * i}\n" * 40).encode() for i in range(30)]


@pytest.fixture(scope="module")
def corpus():
    return Corpus("toy", DOCS[:-3], DOCS[-3:], {"source": "toy", "files": len(DOCS), "bytes": sum(map(len, DOCS))})


def tiny(scheme="alibi", **kw):
    return configs("tiny", scheme, **{"steps": 12, "save_every": 6, "eval_every": 6, **kw})


def test_lr_schedule_closed_form():
    cfg = TrainConfig(steps=110, warmup=10, lr=1.0, min_lr_ratio=0.1)
    assert lr_at(0, cfg) == pytest.approx(0.1)
    assert lr_at(9, cfg) == pytest.approx(1.0)
    assert lr_at(10, cfg) == pytest.approx(1.0)
    assert lr_at(60, cfg) == pytest.approx(0.1 + 0.9 * 0.5)  # half way down the cosine
    assert lr_at(110, cfg) == pytest.approx(0.1)
    longer = TrainConfig(steps=210, warmup=10, lr=1.0, min_lr_ratio=0.1)
    assert lr_at(60, longer) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 50 / 200)))


def test_run_directory_layout_and_load(tmp_path, corpus):
    model_cfg, train_cfg = tiny()
    summary = train(tmp_path / "run", model_cfg, train_cfg, progress=False, corpus=corpus)
    run = tmp_path / "run"
    files = {"config.json", "model.safetensors", "checkpoint.safetensors", "metrics.jsonl"}
    assert {p.name for p in run.iterdir()} == files
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["scheme"] == "alibi" and config["train"]["steps"] == 12
    assert config["data"]["fingerprint"] == corpus.fingerprint
    rows = runs.read_metrics(run)
    assert [r["step"] for r in rows if "val_bpb" in r] == [6, 12]
    assert all({"step", "loss", "lr", "bytes_per_s"} <= set(r) for r in rows)
    assert summary["val_bpb"] == rows[-1]["val_bpb"]
    model, cfg = runs.load(run)
    assert not model.training and cfg == config
    # deterministic weights file: same seed, same bytes
    train(tmp_path / "again", model_cfg, train_cfg, progress=False, corpus=corpus)
    assert (run / "model.safetensors").read_bytes() == (tmp_path / "again" / "model.safetensors").read_bytes()


def test_learnable_bias_trains_and_stays_in_range(tmp_path, corpus):
    model_cfg, train_cfg = tiny("kerple-power", lr=0.5)
    train(tmp_path / "k", model_cfg, train_cfg, progress=False, corpus=corpus)
    model, _ = runs.load(tmp_path / "k")
    a, p = model.scheme.a.detach(), model.scheme.p.detach()  # float32 bounds, compared in float32
    assert (a >= torch.tensor(0.01)).all() and (p >= torch.tensor(0.01)).all() and (p <= 2).all()
    assert (a == torch.tensor(0.01)).any() or (p == 2).any() or (p == torch.tensor(0.01)).any()  # lr 0.5 hit a bound


def test_resume_extends_and_refuses_changes(tmp_path, corpus):
    model_cfg, train_cfg = tiny()
    run = tmp_path / "run"
    train(run, model_cfg, train_cfg, progress=False, corpus=corpus)
    before = (run / "model.safetensors").read_bytes()
    assert train(run, model_cfg, train_cfg, resume=True, progress=False, corpus=corpus)["done"]  # finished: no-op
    assert (run / "model.safetensors").read_bytes() == before
    _, changed = tiny(lr=0.5)
    with pytest.raises(RunError, match=r"train.lr"):
        train(run, model_cfg, changed, resume=True, progress=False, corpus=corpus)
    other_model, _ = tiny("rope")
    with pytest.raises(RunError, match=r"model.scheme"):
        train(run, other_model, train_cfg, resume=True, progress=False, corpus=corpus)
    _, longer = tiny(steps=18)
    train(run, model_cfg, longer, resume=True, progress=False, corpus=corpus)
    assert [r["step"] for r in runs.read_metrics(run) if "val_bpb" in r] == [6, 12, 18]


def test_existing_run_dir_is_refused_untouched(tmp_path, corpus):
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    with pytest.raises(RunError, match="not empty"):
        train(run, *tiny(), progress=False, corpus=corpus)
    assert [p.name for p in run.iterdir()] == ["notes.txt"]


def test_nan_loss_stops_and_keeps_last_checkpoint(tmp_path, corpus, monkeypatch):
    import lexkit.train as T

    real, calls = T.F.cross_entropy, {"n": 0}

    def poisoned(*args, **kwargs):
        calls["n"] += 1
        out = real(*args, **kwargs)
        return out * float("nan") if calls["n"] > 9 else out  # after the step-6 checkpoint

    monkeypatch.setattr(T.F, "cross_entropy", poisoned)
    with pytest.raises(TrainError, match=r"loss is nan at step \d+.*checkpoint \(step 6\)"):
        train(tmp_path / "run", *tiny(), progress=False, corpus=corpus)
    from lexkit.train import make_optimizer

    model = runs.build_model(runs.read_config(tmp_path / "run"))
    state = runs.load_checkpoint(tmp_path / "run", model, make_optimizer(model, TrainConfig()))
    assert state["step"] == 6


def test_corrupt_and_truncated_weights_are_clear_errors(tmp_path, corpus):
    run = tmp_path / "run"
    train(run, *tiny(), progress=False, corpus=corpus)
    weights = run / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(RunError, match="corrupt or truncated"):
        runs.load(run)
    weights.write_bytes(b"\x00" * 64)
    with pytest.raises(RunError, match="corrupt or truncated"):
        runs.load(run)
    with pytest.raises(RunError, match="does not exist"):
        runs.load(tmp_path / "missing")
    with pytest.raises(RunError, match="not a lexkit run"):
        runs.load(tmp_path)


def _lexkit(*args, **kw):
    return subprocess.run([sys.executable, "-m", "lexkit", *args], capture_output=True, text=True, **kw)


def _data_dir(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    for i, doc in enumerate(DOCS):
        (folder / f"doc{i}.py").write_bytes(doc)
    return folder


def test_sigkill_then_resume_is_byte_identical(tmp_path):
    """Kill a CLI run with SIGKILL after its first checkpoint, resume it, and compare weights
    byte for byte with an uninterrupted run of the same seed."""
    data = _data_dir(tmp_path)
    common = ["--scheme", "kerple-log", "--preset", "tiny", "--data", str(data), "--steps", "300",
              "--save-every", "10", "--eval-every", "100", "--threads", "1", "--quiet"]
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "lexkit", "train", "--out", str(killed), *common],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (killed / "checkpoint.safetensors").exists() and time.time() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    metadata = __import__("safetensors").safe_open(str(killed / "checkpoint.safetensors"), "pt").metadata()
    state = json.loads(metadata["trainer"])
    assert 10 <= state["step"] < 300
    resumed = _lexkit("train", "--resume", "--out", str(killed), "--threads", "1", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    whole = tmp_path / "whole"
    straight = _lexkit("train", "--out", str(whole), *common)
    assert straight.returncode == 0, straight.stderr
    assert (killed / "model.safetensors").read_bytes() == (whole / "model.safetensors").read_bytes()
    steps = [r["step"] for r in runs.read_metrics(killed)]
    assert steps == sorted(set(steps)) and steps[-1] == 300  # no duplicated rows past the checkpoint


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--scheme", "nope"], "unknown position scheme 'nope'"),
        (["--scheme", "xpos:gama=1"], "unknown parameter 'gama'"),
        (["--scheme", "xpos:gamma=-1"], "gamma=-1"),
        (["--scheme", "rope", "--data", "/no/such/dir"], "does not exist"),
        (["--scheme", "rope", "--device", "cuda"], "cuda"),
        (["--scheme", "rope", "--steps", "0"], "steps must be a positive integer"),
        (["--scheme", "rope", "--steps", "ten"], "invalid int value"),
    ],
)
def test_cli_bad_input(tmp_path, capsys, argv, message):
    if "cuda" in argv and torch.cuda.is_available():
        pytest.skip("CUDA present")
    out = tmp_path / "run"
    with pytest.raises(SystemExit) if "ten" in argv else _nothing():
        code = main(["train", "--preset", "tiny", "--out", str(out), *argv])
        assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]
    assert not out.exists() or not any(out.iterdir())


def test_cli_existing_run_dir(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert main(["train", "--scheme", "rope", "--preset", "tiny", "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (out / "keep.txt").read_text() == "x"


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
