"""lexkit.training.runs: run directories. Weights checked against their content hash and config.json,
refusals that name the file, metrics read past a cut-short line, config sections, file modes, and
``lexkit runs`` listing each run and its state."""

import hashlib
import json
import os
import warnings
from pathlib import Path

import pytest
import torch

from cli_checks import one_error_line, snapshot
from lexkit.cli import main
from lexkit.core.errors import RunError
from lexkit.data.corpus import Corpus
from lexkit.evaluate import evaluate_run
from lexkit.training import runs
from lexkit.training.loop import train
from lexkit.training.settings import configs
from lock_holder import Holder
from stop import stop_at
from toy_corpus import STUDY_DOCS


def test_content_hash_covers_name_dtype_shape_and_bytes():
    a = {"w": torch.arange(4, dtype=torch.float32)}
    h = runs.content_hash(a)
    assert h == hashlib.sha256(b"w|torch.float32|(4,)\n" + a["w"].numpy().tobytes()).hexdigest()
    assert runs.content_hash({"w": a["w"].view(2, 2)}) != h
    assert runs.content_hash({"v": a["w"]}) != h
    assert runs.content_hash({"w": a["w"].to(torch.float64)}) != h


def _data_offset(path: Path) -> int:
    return 8 + int.from_bytes(path.read_bytes()[:8], "little")


def test_corrupt_weights_are_refused_naming_the_file(run, capsys):
    weights = run / runs.WEIGHTS
    raw = bytearray(weights.read_bytes())
    start = _data_offset(weights) + 1000
    raw[start:start + 200] = bytes(b ^ 0xFF for b in raw[start:start + 200])  # header intact
    weights.write_bytes(bytes(raw))
    assert main(["eval", str(run), "--lengths", "16"]) == 2
    line = one_error_line(capsys)
    assert str(weights) in line and "corrupt" in line and "hash" in line
    ckpt = run / runs.CHECKPOINT
    raw = bytearray(ckpt.read_bytes())
    raw[_data_offset(ckpt) + 10] ^= 1
    ckpt.write_bytes(bytes(raw))
    assert main(["train", "--resume", "--out", str(run), "--steps", "18", "--quiet"]) == 2
    assert str(ckpt) in one_error_line(capsys)


def test_weights_copied_from_another_run_are_refused(trained, run, capsys):
    for name in (runs.WEIGHTS, runs.CHECKPOINT):  # rope and alibi have the same tensor names
        (run / name).write_bytes((trained / "rope" / name).read_bytes())
    assert main(["eval", str(run), "--lengths", "16"]) == 2
    line = one_error_line(capsys)
    assert str(run / runs.WEIGHTS) in line and "scheme 'rope' there, 'alibi' in config.json" in line
    assert main(["train", "--resume", "--out", str(run), "--steps", "18", "--quiet"]) == 2
    assert "another model" in one_error_line(capsys)


def test_a_run_written_by_0_1_loads_with_a_warning(run, capsys):
    from safetensors.torch import load_file, save_file

    weights = run / runs.WEIGHTS
    save_file(load_file(str(weights)), str(weights), metadata={"format": "pt"})  # 0.1: no hash, no model
    with pytest.warns(runs.RunWarning, match="no content hash"):
        runs.load(run)
    assert main(["eval", str(run), "--lengths", "16"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"warning: {weights} has no content hash (written by lexkit 0.1): it cannot be checked for damage"]


def test_resume_with_weights_but_no_checkpoint_refuses(run, capsys):
    (run / runs.CHECKPOINT).unlink()
    before = snapshot(run)
    assert main(["train", "--resume", "--out", str(run), "--quiet"]) == 2
    line = one_error_line(capsys)
    assert "no checkpoint.safetensors" in line and "overwrite" in line and "start over" in line
    assert snapshot(run) == before


@pytest.mark.parametrize("section", ["data", "train"])
def test_config_missing_a_section_is_one_line(run, capsys, section):
    """Resuming needs every section; using the model needs the model and data ones."""
    config = json.loads((run / runs.CONFIG).read_text())
    del config[section]
    (run / runs.CONFIG).write_text(json.dumps(config))
    needs = [["train", "--resume", "--out", str(run), "--quiet"]]
    if section == "data":
        needs += [["eval", str(run), "--lengths", "16"], ["resolution", str(run), "--lengths", "16"]]
    else:
        assert main(["eval", str(run), "--lengths", "16"]) == 0
        capsys.readouterr()
    for argv in needs:
        assert main(argv) == 2
        assert f"no {section!r} section" in one_error_line(capsys)
    assert main(["runs", str(run)]) == 0
    assert "unreadable" in capsys.readouterr().out


def test_partial_last_metrics_line_does_not_block_resume(run, capsys):
    metrics = run / runs.METRICS
    rows = metrics.read_text()
    metrics.write_text(rows + '{"step": 13, "lo')  # a write cut short
    assert [r["step"] for r in runs.read_metrics(run)] == [json.loads(r)["step"] for r in rows.splitlines()]
    assert main(["train", "--resume", "--out", str(run), "--steps", "18", "--quiet"]) == 0
    assert [r["step"] for r in runs.read_metrics(run)][-1] == 18
    metrics.write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    with pytest.raises(RunError, match=rf"{metrics}: line 2 is not a metrics row"):
        runs.read_metrics(run)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_file_modes_follow_the_umask(trained, tmp_path, mask, mode):
    model_cfg, train_cfg = configs("tiny", "rope", steps=6, save_every=6, eval_every=6, data=str(trained / "data"))
    old = os.umask(mask)
    try:
        train(tmp_path / "m", model_cfg, train_cfg, threads=1, progress=False)
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "m").iterdir()}
    assert modes == dict.fromkeys(["config.json", "model.safetensors", "checkpoint.safetensors", "metrics.jsonl"], mode)


def test_runs_lists_each_run(trained, tmp_path, capsys):
    stopped = tmp_path / "deep" / "stopped"
    stopped.parent.mkdir()
    stopped.mkdir()
    for f in (trained / "rope").iterdir():
        (stopped / f.name).write_bytes(f.read_bytes())
    config = json.loads((stopped / runs.CONFIG).read_text())
    config["train"]["steps"] = 100  # as if it was started for 100 and stopped at 12
    (stopped / runs.CONFIG).write_text(json.dumps(config))
    holder = Holder(tmp_path / "deep")  # not a run: a lock alone is not listed
    try:
        assert main(["runs", str(trained)]) == 0
        assert main(["runs", str(tmp_path)]) == 0
    finally:
        holder.kill()
        holder.wait()
    out = capsys.readouterr().out.splitlines()
    bpb = {s: runs.read_metrics(trained / s)[-1]["val_bpb"] for s in ("alibi", "rope")}
    assert out[0].split() == ["scheme", "layout", "length", "step", "state", "val", "bpb", "ranks", "device", "parent",
                              "size", "path"]
    alibi = next(line for line in out if line.endswith(str(trained / "alibi"))).split()
    assert alibi[:6] == ["alibi", "-", "32", "12/12", "finished", f"{bpb['alibi']:.4f}"]
    stopped_row = next(line for line in out if line.endswith(str(stopped))).split()
    assert stopped_row[:5] == ["rope", "-", "32", "12/100", "stopped"]
    assert main(["runs", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in one_error_line(capsys)


def test_runs_shows_a_run_being_written(run, capsys):
    holder = Holder(run)
    try:
        assert main(["runs", str(run)]) == 0
    finally:
        holder.kill()
        holder.wait()
    assert capsys.readouterr().out.splitlines()[1].split()[4] == "writing"


def test_corrupt_and_truncated_weights_are_clear_errors(run, tmp_path):
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


def test_a_run_records_every_parameter_and_a_changed_default_does_not_change_it(trained, monkeypatch):
    """config.json keeps every layer's resolved spec (defaults included); after a registered default
    changes, the run still scores as it trained (one warning naming both), and the study keys its
    cache on the resolved spec, so it trains again instead of serving the old run's numbers."""
    from lexkit import ModelConfig
    from lexkit.core.specs import Param
    from lexkit.positions.rotary import RoPE

    run = trained / "rope"
    config = json.loads((run / "config.json").read_text())
    assert config["resolved"] == "(rope:base=10000.0,scaling=none@causal)x2"
    before = evaluate_run(run, lengths=[32], patterns=["causal"])["results"][0]["bpb"]
    key_before = ModelConfig(**config["model"]).identity()
    monkeypatch.setitem(RoPE.params, "base", Param(float, 500.0, "a changed default", lambda x: x > 0, "> 0"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        after = evaluate_run(run, lengths=[32], patterns=["causal"])["results"][0]["bpb"]
    warning = [str(w.message) for w in caught]
    assert len(warning) == 1 and "rope:base=10000.0" in warning[0] and "rope:base=500.0" in warning[0]
    assert caught[0].category is runs.RunWarning
    assert before == after
    assert ModelConfig(**config["model"]).identity() != key_before


def test_an_output_that_is_no_regular_file_is_written_into_not_replaced(tmp_path):
    """`--json /dev/null` renamed a temporary file over /dev/null: the device became an empty file,
    and every later write to /dev/null on the machine filled it. A pipe stands in for the device here."""
    import os
    import stat
    import threading

    from lexkit.training.runs import files

    pipe, got = tmp_path / "pipe", []
    os.mkfifo(pipe)
    reader = threading.Thread(target=lambda: got.append(pipe.read_text()), daemon=True)
    reader.start()
    files.write_json(pipe, {"a": 1})
    reader.join(timeout=10)
    assert stat.S_ISFIFO(os.stat(pipe).st_mode) and got == ['{\n  "a": 1\n}\n']
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("old")
    link.symlink_to(target)
    files.atomic_write(link, "new")
    assert link.is_symlink() and target.read_text() == "new"  # the link kept, its file written


def test_runs_shows_the_bpb_of_the_checkpoint_not_of_steps_past_it(tmp_path, capsys, monkeypatch):
    """A run stopped at step 3 with its checkpoint at step 2 logged a validation bpb at step 3
    that belongs to weights nobody kept: `lexkit runs` shows step 2's."""
    corpus = Corpus("toy", [d * 2 for d in STUDY_DOCS[:-3]], STUDY_DOCS[-3:], {"source": "toy"})
    out = tmp_path / "run"
    stop_at(monkeypatch, 3)
    model_cfg, train_cfg = configs("tiny", "rope", steps=6, save_every=2, eval_every=1, log_every=1, eval_windows=2)
    with pytest.raises(KeyboardInterrupt):
        train(out, model_cfg, train_cfg, progress=False, corpus=corpus)
    rows = runs.read_metrics(out)
    bpb = {r["step"]: r["val_bpb"] for r in rows if "val_bpb" in r}
    assert runs.trainer_state(out)["step"] == 2 and set(bpb) == {1, 2, 3} and bpb[3] != bpb[2]
    assert runs.summary(out)["val_bpb"] == bpb[2]
    assert main(["runs", str(tmp_path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.endswith(str(out)))
    assert line.split()[:6] == ["rope", "-", "32", "2/6", "stopped", f"{bpb[2]:.4f}"]
