"""Training runs: the schedule, run directory, atomic checkpoints, byte-identical resume after
SIGKILL, refusals, NaN stop, and the bad-input contract of `lexkit train`."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from lexkit.cli import main
from lexkit.core.errors import RunError
from lexkit.data.corpus import Corpus
from lexkit.training import runs
from lexkit.training.loop import TrainError, lr_at, train
from lexkit.training.runs import configs_from_run
from lexkit.training.settings import TrainConfig, configs
from stop import stop_at

DOCS = [(f"def f{i}(x):\n    return x * {i} + {i * i}\n" * 40).encode() for i in range(30)]


@pytest.fixture(scope="module")
def corpus():
    return Corpus("toy", DOCS[:-3], DOCS[-3:], {"source": "toy", "files": len(DOCS), "bytes": sum(map(len, DOCS))})


def tiny(scheme="alibi", **kw):
    """A tiny run of 6 steps, checkpointed and evaluated at 3 and 6."""
    return configs("tiny", scheme, **{"steps": 6, "save_every": 3, "eval_every": 3, **kw})


@pytest.fixture(scope="module")
def finished(tmp_path_factory, corpus):
    """The run of ``tiny()``, trained once: read it only (copy it to change it)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    train(out, *tiny(), progress=False, corpus=corpus)
    return out


def test_lr_schedule_closed_form():
    cfg = TrainConfig(steps=110, warmup=10, lr=1.0, min_lr_ratio=0.1)
    assert lr_at(0, cfg) == pytest.approx(0.1)
    assert lr_at(9, cfg) == pytest.approx(1.0)
    assert lr_at(10, cfg) == pytest.approx(1.0)
    assert lr_at(60, cfg) == pytest.approx(0.1 + 0.9 * 0.5)  # half way down the cosine
    assert lr_at(110, cfg) == pytest.approx(0.1)
    longer = TrainConfig(steps=210, warmup=10, lr=1.0, min_lr_ratio=0.1)
    assert lr_at(60, longer) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 50 / 200)))


def test_run_directory_layout_and_load(tmp_path, corpus, finished):
    model_cfg, train_cfg = tiny()
    summary = train(tmp_path / "run", model_cfg, train_cfg, progress=False, corpus=corpus)
    run = tmp_path / "run"
    files = {"config.json", "model.safetensors", "checkpoint.safetensors", "metrics.jsonl"}
    assert {p.name for p in run.iterdir()} == files
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["scheme"] == "alibi" and config["train"]["steps"] == 6
    assert config["data"]["fingerprint"] == corpus.fingerprint
    rows = runs.read_metrics(run)
    assert [r["step"] for r in rows if "val_bpb" in r] == [3, 6]
    assert all({"step", "loss", "lr", "bytes_per_s"} <= set(r) for r in rows)
    assert summary["val_bpb"] == rows[-1]["val_bpb"]
    model, cfg = runs.load(run)
    assert not model.training and cfg == config
    # deterministic weights file: same seed, same bytes (the same settings trained again, elsewhere)
    assert (run / "model.safetensors").read_bytes() == (finished / "model.safetensors").read_bytes()


def test_learnable_bias_trains_and_stays_in_range(tmp_path, corpus):
    model_cfg, train_cfg = tiny("kerple-power", lr=0.5)
    train(tmp_path / "k", model_cfg, train_cfg, progress=False, corpus=corpus)
    model, _ = runs.load(tmp_path / "k")
    a, p = model.scheme.a.detach(), model.scheme.p.detach()  # float32 bounds, compared in float32
    assert (a >= torch.tensor(0.01)).all() and (p >= torch.tensor(0.01)).all() and (p <= 2).all()
    assert (a == torch.tensor(0.01)).any() or (p == 2).any() or (p == torch.tensor(0.01)).any()  # lr 0.5 hit a bound


def test_resume_extends_and_refuses_changes(tmp_path, corpus, finished):
    import shutil

    model_cfg, train_cfg = tiny()
    run = shutil.copytree(finished, tmp_path / "run")
    before = (run / "model.safetensors").read_bytes()
    assert train(run, model_cfg, train_cfg, resume=True, progress=False, corpus=corpus)["done"]  # finished: no-op
    assert (run / "model.safetensors").read_bytes() == before
    _, changed = tiny(lr=0.5)
    with pytest.raises(RunError, match=r"train.lr"):
        train(run, model_cfg, changed, resume=True, progress=False, corpus=corpus)
    other_model, _ = tiny("rope")
    with pytest.raises(RunError, match=r"model.scheme"):
        train(run, other_model, train_cfg, resume=True, progress=False, corpus=corpus)
    _, longer = tiny(steps=9)
    train(run, model_cfg, longer, resume=True, progress=False, corpus=corpus)
    assert [r["step"] for r in runs.read_metrics(run) if "val_bpb" in r] == [3, 6, 9]


def test_existing_run_dir_is_refused_untouched(tmp_path, corpus):
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    with pytest.raises(RunError, match="not empty"):
        train(run, *tiny(), progress=False, corpus=corpus)
    assert [p.name for p in run.iterdir()] == ["notes.txt"]


def test_nan_loss_stops_and_keeps_last_checkpoint(tmp_path, corpus, monkeypatch):
    import lexkit.training.loop as T

    real, calls = T.F.cross_entropy, {"n": 0}

    def poisoned(*args, **kwargs):
        calls["n"] += 1
        out = real(*args, **kwargs)
        return out * float("nan") if calls["n"] > 5 else out  # from step 5: after the step-3 checkpoint

    monkeypatch.setattr(T.F, "cross_entropy", poisoned)
    with pytest.raises(TrainError, match=r"loss is nan at step \d+.*checkpoint \(step 3\)"):
        train(tmp_path / "run", *tiny(), progress=False, corpus=corpus)
    from lexkit.training.loop import make_optimizer

    model = runs.build_model(runs.read_config(tmp_path / "run"))
    state = runs.load_checkpoint(tmp_path / "run", model, make_optimizer(model, TrainConfig()))
    assert state["step"] == 3


def _lexkit(*args, **kw):
    return subprocess.run([sys.executable, "-m", "lexkit", *args], capture_output=True, text=True, **kw)


def _data_dir(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    for i, doc in enumerate(DOCS):
        (folder / f"doc{i}.py").write_bytes(doc)
    return folder


def _train_main(argv: list[str], slow_from: int) -> None:
    """``lexkit ARGV`` in this forked process, each step from index ``slow_from`` on after a pause of
    50 ms (a sleep: no CPU): the parent, polling for the first checkpoint, kills it long before its end."""
    import lexkit.training.loop as T
    from lexkit.cli import main

    real = T.lr_at

    def slow(step, cfg):
        if step >= slow_from:
            time.sleep(0.05)
        return real(step, cfg)

    T.lr_at = slow
    os._exit(main(argv))


def test_sigkill_of_a_forked_trainer_then_resume_is_byte_identical(tmp_path):
    """Fast sibling of the CLI test below: the trainer is this process forked (no second import of
    torch) and SIGKILLed after its first checkpoint; resumed and run whole in this process, the
    weights match byte for byte and the metrics have no duplicated rows."""
    import multiprocessing

    data = _data_dir(tmp_path)
    common = ["--scheme", "kerple-log", "--preset", "tiny", "--data", str(data), "--steps", "8",
              "--save-every", "4", "--eval-every", "4", "--threads", "1", "--quiet"]
    killed = tmp_path / "killed"
    proc = multiprocessing.get_context("fork").Process(target=_train_main, args=(["train", "--out", str(killed),
                                                                                  *common], 4))
    proc.start()
    deadline = time.time() + 60
    while not (killed / "checkpoint.safetensors").exists() and time.time() < deadline:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    assert proc.exitcode == -signal.SIGKILL
    assert 4 <= runs.trainer_state(killed)["step"] < 8 and (killed / ".lock").exists()  # no cleanup ran
    assert main(["train", "--resume", "--out", str(killed), "--threads", "1", "--quiet"]) == 0
    whole = tmp_path / "whole"
    train(whole, *configs("tiny", "kerple-log", data=str(data), steps=8, save_every=4, eval_every=4), threads=1,
          progress=False)
    assert (killed / "model.safetensors").read_bytes() == (whole / "model.safetensors").read_bytes()
    steps = [r["step"] for r in runs.read_metrics(killed)]
    assert steps == sorted(set(steps)) == [r["step"] for r in runs.read_metrics(whole)] and steps[-1] == 8


@pytest.mark.slow  # fast sibling: test_sigkill_of_a_forked_trainer_then_resume_is_byte_identical
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


# -- fine-tunes (--init): interrupted, resumed, refused ---------------------------------------------
@pytest.fixture(scope="module")
def parent(tmp_path_factory, corpus):
    """A trained rope run to fine-tune from (6 steps at length 32)."""
    out = tmp_path_factory.mktemp("parent") / "rope"
    train(out, *tiny("rope"), progress=False, corpus=corpus)
    return out


def finetune(parent, **kw):
    """A fine-tune of ``parent`` at twice its length: 4 steps, each logged, one checkpoint at the end."""
    return configs_from_run(parent, **{"train_len": 64, "steps": 4, "eval_every": 2, "save_every": 100,
                                       "log_every": 1, **kw})


def numbers(run):
    """The deterministic part of a run's metrics rows (not its timings)."""
    keys = ("step", "loss", "lr", "grad_norm", "val_bpb")
    return [{k: r[k] for k in keys if k in r} for r in runs.read_metrics(run)]


def test_a_finetune_resumed_before_its_first_checkpoint_starts_again_from_its_parent(
        tmp_path, corpus, parent, monkeypatch):
    """Killed after its first metrics rows and before any checkpoint, a resumed fine-tune reloads
    its parent (not random weights): the same rows and the same weights, byte for byte, as an
    uninterrupted one."""
    whole = tmp_path / "whole"
    train(whole, *finetune(parent), progress=False, corpus=corpus, init=parent)
    killed = tmp_path / "killed"
    restore = stop_at(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        train(killed, *finetune(parent), progress=False, corpus=corpus, init=parent)
    restore()
    assert not (killed / runs.CHECKPOINT).exists() and [r["step"] for r in runs.read_metrics(killed)] == [1, 2, 3]
    train(killed, *finetune(parent), resume=True, progress=False, corpus=corpus)
    assert numbers(killed) == numbers(whole) and len(numbers(whole)) == 4
    assert (killed / runs.WEIGHTS).read_bytes() == (whole / runs.WEIGHTS).read_bytes()


def test_a_finetune_whose_parent_changed_or_went_is_not_resumed(tmp_path, corpus, parent, monkeypatch):
    import shutil

    moved = tmp_path / "parent"
    shutil.copytree(parent, moved)
    out = tmp_path / "ft"
    restore = stop_at(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        train(out, *finetune(moved), progress=False, corpus=corpus, init=moved)
    restore()
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    other = tmp_path / "other"
    train(other, *tiny("rope", seed=1), progress=False, corpus=corpus)
    shutil.copy(other / runs.WEIGHTS, moved / runs.WEIGHTS)  # a valid weight file, but not the parent's
    with pytest.raises(RunError, match=r"^cannot resume .* changed since \(sha256"):
        train(out, *finetune(moved), resume=True, progress=False, corpus=corpus)
    shutil.rmtree(moved)
    with pytest.raises(RunError, match=r"^cannot resume .*model.safetensors is missing"):
        train(out, *finetune(parent), resume=True, progress=False, corpus=corpus)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # nothing touched


def test_a_stop_signal_checkpoints_the_step_in_progress(tmp_path, corpus, monkeypatch, capsys):
    """SIGINT or SIGTERM during training: the step in progress finishes, is checkpointed, the
    command stops (exit 130, no lock left); resumed, the run ends with the same weights, byte
    for byte, as an uninterrupted one."""
    data = _data_dir(tmp_path)
    common = ["--scheme", "rope", "--preset", "tiny", "--data", str(data), "--steps", "6", "--save-every", "3",
              "--eval-every", "3", "--quiet", "--threads", "1"]
    whole = tmp_path / "whole"
    train(whole, *configs("tiny", "rope", data=str(data), steps=6, save_every=3, eval_every=3), threads=1,
          progress=False)
    for sig, at in ((signal.SIGINT, 3), (signal.SIGTERM, 4)):  # steps 4 and 5 checkpointed by the signal alone
        out = tmp_path / sig.name
        before = signal.getsignal(sig)  # SIG_IGN under a shell's background job, the default otherwise
        restore = stop_at(monkeypatch, at, lambda s=sig: os.kill(os.getpid(), s))
        assert main(["train", "--out", str(out), *common]) == 130
        restore()
        assert capsys.readouterr().err.strip() == "error: interrupted"
        assert runs.trainer_state(out)["step"] == at + 1 and not (out / ".lock").exists()
        assert {"started", "finished", "wall_seconds"} <= set(json.loads((out / runs.CONFIG).read_text())["provenance"])
        assert signal.getsignal(sig) == before  # handlers restored to what they were
        assert main(["train", "--resume", "--out", str(out), "--quiet", "--threads", "1"]) == 0
        assert (out / runs.WEIGHTS).read_bytes() == (whole / runs.WEIGHTS).read_bytes(), sig.name


@pytest.mark.parametrize("flags, words", [
    (["--dim", "64"], ["--dim", "shape is fixed"]),
    (["--heads", "4", "--layers", "3"], ["--layers 3 (2 in", "--heads 4 (2 in", "shape is fixed"]),
    (["--heads", "2", "--layers", "3"], ["--layers 3 (2 in", "shape is fixed"]),  # the equal one is not named
    (["--scheme", "t5"], ["--scheme t5", "does not match", "needs parameters", "scheme.", "trained with rope"]),
    (["--scheme", "learned:max_len=16"], ["--scheme learned:max_len=16", "cannot train at --train-len 64"]),
])
def test_finetune_refusals_name_the_flag_and_leave_nothing(tmp_path, parent, flags, words, capsys):
    out = tmp_path / "ft"
    toy = ["--data", str(_data_dir(tmp_path))]  # the toy corpus, not the standard library's 1,800 files
    assert main(["train", "--init", str(parent), "--train-len", "64", "--out", str(out), "--quiet", *toy, *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and all(w in err[0] for w in words), err
    assert "model.safetensors does not match config.json" not in err[0]  # the parent is not blamed
    assert not out.exists()


def test_finetune_accepts_the_parents_own_shape(tmp_path, parent, capsys):
    """--layers/--dim/--heads equal to the parent's are the shape it has: accepted (a different one is
    refused, above)."""
    out = tmp_path / "ft"
    assert main(["train", "--init", str(parent), "--layers", "2", "--dim", "32", "--heads", "2", "--train-len", "64",
                 "--steps", "2", "--eval-every", "2", "--save-every", "2", "--data", str(_data_dir(tmp_path)),
                 "--out", str(out), "--quiet", "--threads", "1"]) == 0
    model = json.loads((out / runs.CONFIG).read_text())["model"]
    assert (model["n_layers"], model["d_model"], model["n_heads"], model["train_len"]) == (2, 32, 2, 64)
    capsys.readouterr()


def test_a_corrupt_parent_leaves_nothing(tmp_path, parent, capsys):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(parent, broken)
    data = bytearray((broken / runs.WEIGHTS).read_bytes())
    data[-1] ^= 0xFF
    (broken / runs.WEIGHTS).write_bytes(bytes(data))
    out = tmp_path / "ft"
    toy = ["--data", str(_data_dir(tmp_path))]  # the toy corpus, not the standard library's 1,800 files
    assert main(["train", "--init", str(broken), "--out", str(out), "--quiet", *toy]) == 2
    assert "is corrupt" in capsys.readouterr().err and not out.exists()


def test_a_learned_table_shorter_than_the_training_length_leaves_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--scheme", "learned:max_len=16", "--preset", "tiny", "--train-len", "32", "--out", str(out),
            "--data", str(_data_dir(tmp_path)), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "learned positions cover 0..15" in err[0] and "--train-len 32" in err[0]
    assert not out.exists()


def test_init_records_the_parent_by_absolute_path(tmp_path, parent, corpus, monkeypatch):
    monkeypatch.chdir(parent.parent)
    out = tmp_path / "ft"
    train(out, *finetune(parent, steps=2, eval_every=2), progress=False, corpus=corpus, init=parent.name)
    recorded = json.loads((out / runs.CONFIG).read_text())["init"]["run"]
    assert recorded == str(parent.resolve())


def test_logn_help_says_what_it_changes(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "changes nothing in training" in text and "under --init: the parent's" in text


# -- what a run records: grad norm, step time, MFU, provenance ---------------------------------------
def test_metrics_rows_carry_the_grad_norm_before_clipping_and_the_step_time(tmp_path, corpus):
    """The step-1 row's grad_norm is the 2-norm of the first step's gradients, recomputed here
    in float64 from the same seed and batch (the norm before clipping: above grad_clip)."""
    from lexkit.data.corpus import Stream, tokens_of
    from lexkit.model.gpt import GPT

    model_cfg, train_cfg = tiny("alibi", log_every=1, grad_clip=0.5)
    train(tmp_path / "run", model_cfg, train_cfg, progress=False, corpus=corpus)
    rows = runs.read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == list(range(1, 7))
    assert all(r["step_seconds"] > 0 and math.isfinite(r["grad_norm"]) and "mfu" not in r for r in rows)
    assert all(r["kernel"] == "dense" for r in rows)  # the attention kernel the step ran (auto on the CPU)
    torch.manual_seed(train_cfg.seed)
    model = GPT(model_cfg)
    x, y = Stream(tokens=tokens_of(corpus.train)).batch(0, train_cfg.batch, model_cfg.train_len, train_cfg.seed,
                                                         rows=slice(0, train_cfg.batch))
    torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
    norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in model.parameters() if p.grad is not None))
    assert norm > train_cfg.grad_clip and rows[0]["grad_norm"] == pytest.approx(norm, rel=1e-5)


def test_mfu_is_logged_when_the_device_peak_is_known(tmp_path, corpus, monkeypatch):
    from lexkit.core import provenance

    monkeypatch.setattr(provenance, "device_name", lambda device: "Test Accelerator")
    monkeypatch.setattr(provenance, "PEAK_FLOPS", (("Test Accelerator", {"float32": 1e12}),))
    model_cfg, train_cfg = tiny("alibi", steps=2, log_every=1)
    train(tmp_path / "run", model_cfg, train_cfg, progress=False, corpus=corpus)
    model, _ = runs.load(tmp_path / "run")
    t, n = model_cfg.train_len, model.num_params()
    flops = (6 * n + 12 * model_cfg.n_layers * model_cfg.d_model * t) * train_cfg.batch * t
    for row in runs.read_metrics(tmp_path / "run"):
        assert row["mfu"] == pytest.approx(flops / row["step_seconds"] / 1e12, rel=1e-3)


def test_config_records_provenance_and_keeps_earlier_sessions(tmp_path, corpus, monkeypatch):
    out = tmp_path / "run"
    restore = stop_at(monkeypatch, 4)
    with pytest.raises(KeyboardInterrupt):
        train(out, *tiny(), progress=False, corpus=corpus)
    restore()
    first = json.loads((out / runs.CONFIG).read_text())["provenance"]
    assert first["world_size"] == 1 and first["device"] == {"type": "cpu", "name": first["device"]["name"],
                                                              "count": 1}
    assert "finished" not in first  # stopped
    train(out, *tiny(), resume=True, progress=False, corpus=corpus)
    second = json.loads((out / runs.CONFIG).read_text())["provenance"]
    assert second["previous"] == [first] and second["wall_seconds"] > 0 and second["finished"] >= second["started"]
    summary = runs.summary(out)
    assert summary["world_size"] == 1 and summary["device"] == "cpu" and summary["train_len"] == 32


# -- --tensorboard ------------------------------------------------------------------------------------
def test_tensorboard_gets_every_metrics_row(tmp_path, monkeypatch):
    from lexkit.training import tensorboard

    opened, received, closed, checked = [], [], [], []

    class Writer:
        def add(self, record, flush=True):
            received.append(dict(record))

        def close(self):
            closed.append(True)

    monkeypatch.setattr(tensorboard, "check_extra", lambda: checked.append(True))
    monkeypatch.setattr(tensorboard, "open_writer", lambda logdir, run=None: opened.append(Path(logdir)) or Writer())
    out = tmp_path / "run"
    argv = ["train", "--scheme", "rope", "--preset", "tiny", "--steps", "4", "--eval-every", "2", "--out", str(out),
            "--data", str(_data_dir(tmp_path)), "--quiet", "--tensorboard"]
    assert main(argv) == 0
    assert checked == [True] and opened == [out / "tb"] and closed == [True]  # the extra checked first
    assert received == runs.read_metrics(out) and len(received) == 2
    assert json.loads((out / runs.CONFIG).read_text())["tensorboard"] == str((out / "tb").absolute())


def test_tensorboard_without_its_extra_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # import fails as without the extra
    out = tmp_path / "run"
    argv = ["train", "--scheme", "rope", "--preset", "tiny", "--out", str(out), "--quiet", "--tensorboard",
            str(tmp_path / "tb")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --tensorboard needs the TensorBoard extra: pip install -e '.[tb]'"]
    assert not out.exists() and not (tmp_path / "tb").exists()


def test_lexkit_train_is_the_module_and_its_main_function(tmp_path, corpus):
    """`lexkit.train(...)` trains, `lexkit.train.lr_at` is the loop's, and help() or inspect show
    train()'s parameters (the module is callable, not shadowed by a function)."""
    import inspect

    import lexkit
    import lexkit.train as module

    assert lexkit.train is module and lexkit.train.lr_at is lr_at and module.__main_function__ is train
    assert inspect.signature(lexkit.train) == inspect.signature(train)
    for name in ("evaluate", "resolution"):
        target = getattr(lexkit, name)
        assert inspect.signature(target) == inspect.signature(target.__main_function__)
    summary = lexkit.train(tmp_path / "run", *tiny(steps=2, eval_every=2), progress=False, corpus=corpus)
    assert summary["step"] == 2 and (tmp_path / "run" / runs.WEIGHTS).is_file()


@pytest.mark.parametrize("train_docs, valid_docs, message", [
    ([b"def f(x):\n    return x\n" * 40], [], "corpus 'toy' has no validation documents"),
    ([], [b"def f(x):\n    return x\n" * 40], "corpus 'toy' has no training documents"),
    ([b"x" * 10], [b"y" * 100], "the training split has 11 tokens, fewer than one window of 33"),
])
def test_a_corpus_training_cannot_use_is_refused_before_the_run_is_written(tmp_path, train_docs, valid_docs,
                                                                           message):
    """`lexkit.train` with an empty validation split failed after making the run directory."""
    toy = Corpus("toy", train_docs, valid_docs, {"source": "toy", "files": 1, "bytes": 1})
    with pytest.raises(ValueError, match=message):
        train(tmp_path / "run", *tiny(), progress=False, corpus=toy)
    assert not (tmp_path / "run").exists()
