"""TensorBoard event files, read back from disk: every numeric field of a metrics row is one scalar
at its step, `lexkit runs --tensorboard` writes one subdirectory per run (a re-export replaces
its own files), a study's evaluations are the means its report shows, and without the extra every
entry point stops with one line naming it."""

import importlib.util
import json
import struct
import sys
from pathlib import Path

import pytest

from lexkit.cli import main
from lexkit.core.errors import LexkitError
from lexkit.study.tensorboard import write_study
from lexkit.training.tensorboard import open_writer
from study_results import LENGTHS, bpb, study_results

needs_tbx = pytest.mark.skipif(importlib.util.find_spec("tensorboardX") is None,
                               reason="needs tensorboardX (pip install -e '.[tb]')")


def read_events(folder: Path) -> list[tuple[str, int, float]]:
    """(tag, step, value) of every scalar in the event files directly in ``folder``: TFRecord
    frames (8-byte length, 4-byte CRC, the Event proto, 4-byte CRC)."""
    from tensorboardX.proto import event_pb2

    out = []
    for path in sorted(folder.glob("events.out.tfevents.*")):
        data, i = path.read_bytes(), 0
        while i < len(data):
            (n,) = struct.unpack("<Q", data[i:i + 8])
            event = event_pb2.Event.FromString(data[i + 12:i + 12 + n])
            i += 12 + n + 4
            out += [(v.tag, event.step, v.simple_value) for v in event.summary.value]
    return sorted(out)


def f32(x: float) -> float:
    """``x`` as the float32 an event file stores."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


#: what each metrics.jsonl key is called in TensorBoard (written out here, not taken from lexkit)
TAGS = {"loss": "train/loss", "lr": "train/lr", "grad_norm": "train/grad_norm", "val_bpb": "val/bpb",
        "bytes_per_s": "perf/bytes_per_s", "step_seconds": "perf/step_seconds", "mfu": "perf/mfu"}

ROWS = [
    {"step": 10, "loss": 5.5, "lr": 1e-3, "bytes_per_s": 1234.5, "grad_norm": 0.75, "step_seconds": 0.02},
    {"step": 20, "loss": 4.25, "lr": 2e-3, "bytes_per_s": 1300, "val_bpb": 3.9, "mfu": 0.31,
     "note": "text", "done": True, "skipped": None},
]


def expected(rows):
    return sorted((TAGS[k], r["step"], f32(v)) for r in rows for k, v in r.items() if k in TAGS)


@needs_tbx
def test_writer_writes_each_numeric_field_at_its_step(tmp_path):
    with open_writer(tmp_path / "tb") as writer:
        for row in ROWS:
            writer.add(row)
    events = read_events(tmp_path / "tb")
    assert events == expected(ROWS)
    assert len(events) == 10  # strings, booleans and None are not scalars


def write_run(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    if rows:
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@needs_tbx
def test_runs_export_one_subdirectory_per_run(tmp_path, capsys):
    root = tmp_path / "study"
    write_run(root / "runs" / "alibi", ROWS)
    write_run(root / "rope", ROWS[:1])
    write_run(root / "empty", [])
    out = tmp_path / "tb"
    assert main(["runs", str(root), "--tensorboard", str(out)]) == 0
    assert read_events(out / "runs" / "alibi") == expected(ROWS)
    assert read_events(out / "rope") == expected(ROWS[:1])
    assert not (out / "empty").exists()
    assert "2 run(s) exported" in capsys.readouterr().out
    # a second export replaces its own files (no doubled curves) and keeps anyone else's
    foreign = out / "rope" / "events.out.tfevents.1.other"
    foreign.write_bytes(b"")
    assert main(["runs", str(root), "--tensorboard", str(out)]) == 0
    assert read_events(out / "rope") == expected(ROWS[:1])
    assert len(list((out / "rope").iterdir())) == 2 and foreign.is_file()


@needs_tbx
def test_study_evaluations_are_the_report_means(tmp_path):
    names = write_study(study_results(), tmp_path)
    assert sorted(names) == ["eval/alibi", "eval/rope", "extension/rope_pi__fine-tuned_", "extension/rope_yarn"]
    events = read_events(tmp_path / "eval" / "rope")
    # mean over the fixture's two seeds, step = evaluation length
    want = [(f"bpb/{slug}", n, f32((bpb("rope", p, n, 0) + bpb("rope", p, n, 1)) / 2))
            for p, slug in (("causal", "causal"), ("window:16", "window_16")) for n in LENGTHS]
    assert [e for e in events if e[0].startswith("bpb/")] == sorted(want)
    ppl = [e for e in events if e[0] == "ppl/causal"]
    assert [s for _, s, _ in ppl] == LENGTHS
    assert ppl[0][2] == pytest.approx((2 ** bpb("rope", "causal", 8, 0) + 2 ** bpb("rope", "causal", 8, 1)) / 2,
                                      rel=1e-6)
    yarn = read_events(tmp_path / "extension" / "rope_yarn")
    assert [(t, s) for t, s, _ in yarn] == [("bpb/causal", n) for n in LENGTHS]


def test_without_the_extra_one_line_names_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # import fails as if not installed
    with pytest.raises(LexkitError, match=r"pip install -e '\.\[tb\]'"):
        open_writer(tmp_path / "tb")
    write_run(tmp_path / "runs" / "a", ROWS)
    assert main(["runs", str(tmp_path / "runs"), "--tensorboard", str(tmp_path / "tb")]) == 2
    assert main(["study", "--preset", "tiny", "--out", str(tmp_path / "s"), "--tensorboard"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: ") and "pip install -e '.[tb]'" in line for line in err)
    assert not (tmp_path / "tb").exists() and not (tmp_path / "s").exists()


@needs_tbx
def test_export_into_a_file_is_refused(tmp_path, capsys):
    write_run(tmp_path / "runs" / "a", ROWS)
    (tmp_path / "tb").write_text("keep")
    assert main(["runs", str(tmp_path / "runs"), "--tensorboard", str(tmp_path / "tb")]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert (tmp_path / "tb").read_text() == "keep"


@needs_tbx
def test_study_flag_writes_evaluations_and_run_curves(tmp_path, monkeypatch, capsys):
    """`lexkit study --tensorboard` after the study (its run stood in for by the fixture's
    results and one logged run): evaluations under eval/, training curves under runs/."""
    out = tmp_path / "s"
    write_run(out / "runs" / "alibi-s0", ROWS)
    monkeypatch.setattr("lexkit.cli.study.Study.run", lambda self: study_results())
    assert main(["study", "--preset", "tiny", "--out", str(out), "--tensorboard", "--quiet"]) == 0
    logdir = out / "tensorboard"
    assert read_events(logdir / "runs" / "alibi-s0") == expected(ROWS)
    assert [s for t, s, _ in read_events(logdir / "eval" / "alibi") if t == "bpb/causal"] == LENGTHS
    assert f"tensorboard --logdir {logdir}" in capsys.readouterr().out


@needs_tbx
def test_each_row_is_on_disk_when_add_returns(tmp_path):
    """A run killed by SIGKILL flushed nothing: its curves lost every step since the last flush."""
    writer = open_writer(tmp_path / "tb")
    writer.add(ROWS[0])
    assert read_events(tmp_path / "tb") == expected(ROWS[:1])  # before close
    writer.close()


@needs_tbx
def test_a_resumed_run_has_every_step_once_with_or_without_the_flag(tmp_path, monkeypatch, capsys):
    """A resumed run's curves missed the steps its killed session had not flushed (52 of 208
    scalars), and a resume without --tensorboard silently stopped them: the resumed writer rewrites
    the curves from metrics.jsonl (cut back to the checkpoint), and the run's recorded logdir goes
    on without the flag. (Rows every 10 steps, the CLI's; killed after the row of step 10 with the last
    checkpoint at step 7, so that row is cut and written again.)"""
    from lexkit.training import runs
    from stop import stop_at
    from toy_corpus import write_corpus

    out, tb = tmp_path / "run", tmp_path / "run" / "tb"
    argv = ["train", "--scheme", "rope", "--preset", "tiny", "--steps", "20", "--save-every", "7", "--eval-every",
            "10", "--data", str(write_corpus(tmp_path / "data")), "--out", str(out), "--quiet"]
    restore = stop_at(monkeypatch, 10)  # killed before step 11: last checkpoint at step 7
    assert main(argv + ["--tensorboard"]) == 130
    restore()
    assert [t for t in read_events(tb) if t[0] == "train/loss"] == [
        ("train/loss", r["step"], f32(r["loss"])) for r in runs.read_metrics(out)]  # 10 on disk
    for path in tb.glob("events.out.tfevents.*"):
        path.write_bytes(b"")  # as a SIGKILL before any flush left them
    capsys.readouterr()
    assert main(argv + ["--resume"]) == 0
    assert f"tensorboard: the curves go on in {tb.absolute()} (recorded in config.json)" in capsys.readouterr().err
    rows = runs.read_metrics(out)
    assert [r["step"] for r in rows] == [10, 20]
    assert read_events(tb) == sorted((tag, r["step"], f32(v)) for r in rows for k, v in r.items()
                                     if k != "step" and isinstance(v, float | int) and not isinstance(v, bool)
                                     for tag in [TAGS.get(k, f"train/{k}")])
    # the files as if written a second earlier: tensorboardX names a file by the second it opens it, and a session
    # in the same second would write over a file left behind (a duplicate the check below must catch), not beside it
    for path in tb.glob("events.out.tfevents.*"):
        stamp = path.name.split(".")[3]
        path.rename(path.with_name(path.name.replace(f".{stamp}.", f".{int(stamp) - 1}.", 1)))
    assert main([*argv[:6], "30", *argv[7:], "--resume", "--tensorboard"]) == 0  # and again: nothing twice
    steps = [s for t, s, _ in read_events(tb) if t == "train/loss"]
    assert steps == [10, 20, 30]


@needs_tbx
def test_tags_are_what_tensorboard_stores(tmp_path):
    """`=` and `+` in a pattern became `_` in TensorBoard although the docs said they were kept."""
    from lexkit.study.tensorboard import study_scalars
    from lexkit.training.tensorboard import tag_slug

    results = study_results()
    results["patterns"] = results["patterns"] + ["sinks:16,K=4"]
    tags = {tag for scalars in study_scalars(results).values() for tag in scalars}
    assert tag_slug("sinks:16,K=4+x") == "sinks_16_K_4_x"
    write_study(results, tmp_path)
    stored = {t for t, _, _ in read_events(tmp_path / "eval" / "rope")}
    assert stored <= tags and {"bpb/window_16", "bpb/causal"} <= stored
