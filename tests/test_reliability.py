"""Run directories that cannot be corrupted, and every bad input answered in one line.

Each test reproduces one case found by trying lexkit as a demanding user and as an adversary
(two writers, resume over finished weights, corrupt or foreign weights, NaN models, tracebacks,
misleading messages, lost output, relative and moved corpora, modes) and checks the new
behaviour: one ``error:`` line, exit 2, nothing written or lost.
"""

import hashlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
import torch

from cli_checks import one_error_line
from lexkit import checks, lock, positions, runs
from lexkit.cli import main
from lexkit.data import load_corpus
from lexkit.errors import RunError

DOCS = [(f"def f{i}(x):\n    return x * {i} + {i * i}\n" * 40).encode() for i in range(30)]
SRC = str(Path(__file__).resolve().parents[1] / "src")
TINY = ["--preset", "tiny", "--steps", "12", "--save-every", "6", "--eval-every", "6", "--quiet", "--threads", "1"]


def _data(folder: Path, docs=DOCS) -> Path:
    folder.mkdir(parents=True)
    for i, doc in enumerate(docs):
        (folder / f"doc{i}.py").write_bytes(doc)
    return folder


def _train(out: Path, data: Path, scheme: str = "alibi", *extra: str) -> None:
    assert main(["train", "--scheme", scheme, "--out", str(out), "--data", str(data), *TINY, *extra]) == 0


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A finished tiny alibi run and a rope one, trained on the same folder of documents."""
    root = tmp_path_factory.mktemp("made")
    data = _data(root / "data")
    _train(root / "alibi", data, "alibi")
    _train(root / "rope", data, "rope")
    return root


@pytest.fixture
def run(made, tmp_path):
    """A private copy of the finished alibi run (tests may damage it)."""
    out = tmp_path / "run"
    out.mkdir()
    for f in (made / "alibi").iterdir():
        (out / f.name).write_bytes(f.read_bytes())
    return out


def _snapshot(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _lexkit(*args, **kw):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "lexkit", *args], capture_output=True, text=True, env=env, **kw)


class _holder:
    """Another process that holds ``folder``'s lock until killed (SIGKILL: no cleanup)."""

    def __init__(self, folder: Path) -> None:
        code = f"import sys, time; sys.path.insert(0, {SRC!r}); from lexkit import lock\n" \
               f"with lock.hold({str(folder)!r}):\n    print('held', flush=True); time.sleep(120)"
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        assert self.proc.stdout.readline().strip() == "held"

    def kill(self) -> None:
        self.proc.kill()

    def wait(self) -> None:
        self.proc.wait()
        self.proc.stdout.close()


# -- 1. one writer per run directory ----------------------------------------------------------------
def test_second_writer_is_refused_and_changes_nothing(run, capsys):
    before = _snapshot(run)
    holder = _holder(run)
    try:
        code = main(["train", "--resume", "--out", str(run), "--steps", "18", "--quiet"])
        line = one_error_line(capsys)
        assert code == 2 and f"{run} is being written by process {holder.pid}" in line
        assert lock.is_locked(run) and lock.holder(run) == holder.pid
        empty = run.parent / "fresh"
        empty.mkdir()
        holder2 = _holder(empty)
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
    assert _snapshot(run) == {**before, ".lock": _snapshot(run)[".lock"]}
    assert lock.holder(run) == holder.pid and not lock.is_locked(run)  # stale
    assert main(["train", "--resume", "--out", str(run), "--steps", "18", "--quiet"]) == 0  # recovered
    assert not (run / ".lock").exists() and runs.trainer_state(run)["step"] == 18


@pytest.mark.slow  # fast sibling: test_second_writer_is_refused_and_changes_nothing
def test_two_trains_started_together_leave_one_consistent_run(tmp_path):
    data = _data(tmp_path / "data")
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


def test_lock_probe_and_release(tmp_path):
    assert not lock.is_locked(tmp_path) and lock.holder(tmp_path) is None
    with lock.hold(tmp_path / "new"):
        assert lock.is_locked(tmp_path / "new") and lock.holder(tmp_path / "new") == os.getpid()
        with pytest.raises(lock.LockedError, match=f"being written by process {os.getpid()}"):
            lock.acquire(tmp_path / "new")  # flock conflicts between two open files, even in one process
    assert not (tmp_path / "new" / ".lock").exists()


# -- 2. integrity ---------------------------------------------------------------------------------
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


def test_weights_copied_from_another_run_are_refused(made, run, capsys):
    for name in (runs.WEIGHTS, runs.CHECKPOINT):  # rope and alibi have the same tensor names
        (run / name).write_bytes((made / "rope" / name).read_bytes())
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


def test_content_hash_covers_name_dtype_shape_and_bytes():
    a = {"w": torch.arange(4, dtype=torch.float32)}
    h = runs.content_hash(a)
    assert h == hashlib.sha256(b"w|torch.float32|(4,)\n" + a["w"].numpy().tobytes()).hexdigest()
    assert runs.content_hash({"w": a["w"].view(2, 2)}) != h
    assert runs.content_hash({"v": a["w"]}) != h
    assert runs.content_hash({"w": a["w"].to(torch.float64)}) != h


# -- 3. no silent overwrite; checks before the directory ------------------------------------------
def test_resume_with_weights_but_no_checkpoint_refuses(run, capsys):
    (run / runs.CHECKPOINT).unlink()
    before = _snapshot(run)
    assert main(["train", "--resume", "--out", str(run), "--quiet"]) == 2
    line = one_error_line(capsys)
    assert "no checkpoint.safetensors" in line and "overwrite" in line and "start over" in line
    assert _snapshot(run) == before


@pytest.mark.parametrize("argv, message", [
    (["--lr", "inf"], "lr must be a finite number > 0 (at most 10), got inf"),
    (["--lr", "nan"], "lr must be a finite number > 0 (at most 10), got nan"),
    (["--train-len", "60000"], "fewer than one window of 60001"),
    (["--train-len", "100000"], "train_len must be a positive integer (at most 65,536), got 100000"),
    (["--steps", str(10**12)], "steps must be a positive integer (at most 2,147,483,648), got 1000000000000"),
    (["--scheme", "xpos:gamma=inf"], "parameter gamma=inf is not a finite number"),
    (["--scheme", "rope:base=inf"], "parameter base=inf is not a finite number"),
])
def test_bad_settings_fail_before_the_directory_exists(made, tmp_path, capsys, argv, message):
    out = tmp_path / "new"
    args = ["train", "--scheme", "rope", "--out", str(out), "--data", str(made / "data"), *TINY, *argv]
    assert main(args) == 2  # a second --scheme replaces the first
    assert message in one_error_line(capsys)
    assert not out.exists()


def test_nan_at_the_first_step_claims_no_checkpoint(made, tmp_path, capsys, monkeypatch):
    import lexkit.train as T

    monkeypatch.setattr(T, "lr_at", lambda step, cfg: float("nan"))
    out = tmp_path / "nan"
    monkeypatch.setattr(T.F, "cross_entropy", lambda *a, **k: torch.tensor(float("nan"), requires_grad=True))
    assert main(["train", "--scheme", "rope", "--out", str(out), "--data", str(made / "data"), *TINY]) == 2
    line = one_error_line(capsys)
    assert "no checkpoint was written yet" in line and "checkpoint (step 0)" not in line


def test_unwritable_out_is_one_line(made, tmp_path, capsys, monkeypatch):
    """A read-only parent (simulated: the tests may run as root, which writes anyway)."""
    parent = tmp_path / "ro"
    parent.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == parent else real(p, mode))
    assert main(["train", "--scheme", "rope", "--out", str(parent / "run"), "--data", str(made / "data"), *TINY]) == 2
    assert f"{parent} is not writable" in one_error_line(capsys)
    assert not (parent / "run").exists()


def test_os_errors_nobody_foresaw_are_one_line(run, capsys, monkeypatch):
    def denied(*a, **k):
        raise PermissionError(13, "Permission denied", str(run / "metrics.jsonl"))

    monkeypatch.setattr("lexkit.runs.RunDir.truncate_metrics", denied)
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


def test_json_is_always_strict(run, tmp_path, capsys):
    doc = {"a": float("nan"), "b": [1.0, float("inf"), {"c": -float("inf")}], "d": 2}
    assert json.loads(checks.strict_json(doc)) == {"a": None, "b": [1.0, None, {"c": None}], "d": 2}

    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))

    out = tmp_path / "e.json"
    assert main(["eval", str(run), "--lengths", "16", "--json", str(out)]) == 0
    strict(out.read_text())
    assert main(["resolution", "--scheme", "rope", "--lengths", "16", "--json", str(out)]) == 0
    strict(out.read_text())
    for line in (run / runs.METRICS).read_text().splitlines():
        strict(line)


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
    before = _snapshot(tmp_path)
    assert main(argv) == 2
    assert message in one_error_line(capsys)
    assert _snapshot(tmp_path) == before


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


def test_non_utf8_file_names_in_data(tmp_path):
    folder = tmp_path / "odd"
    folder.mkdir()
    for i, doc in enumerate(DOCS[:5]):
        (folder / f"doc{i}.py").write_bytes(doc)
    name = os.fsdecode(b"caf\xe9.py")  # latin-1 bytes: not UTF-8
    (Path(folder) / name).write_bytes(DOCS[5])
    corpus = load_corpus(str(folder))
    assert corpus.fingerprint["files"] == 6
    assert load_corpus(str(folder)).fingerprint == corpus.fingerprint  # stable


def test_plot_name_without_suffix_is_reported_as_written(tmp_path, capsys):
    out = tmp_path / "fig"
    assert main(["resolution", "--scheme", "rope", "--lengths", "16", "--plot", str(out)]) == 0
    assert f"wrote {out}.png" in capsys.readouterr().out
    assert (tmp_path / "fig.png").is_file() and not out.exists()


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
    _data(tmp_path / "corpus")
    _train(Path("r"), Path("corpus"), "alibi")
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
    assert main(["train", "--resume", "--out", "r", "--steps", "18", "--data", "moved", "--quiet"]) == 0
    assert runs.read_config("r")["data"]["spec"] == str(tmp_path / "moved")
    _data(tmp_path / "other", DOCS[:20])
    assert main(["train", "--resume", "--out", "r", "--steps", "24", "--data", "other", "--quiet"]) == 2
    assert "is not the one r trained on" in one_error_line(capsys)


# -- devices, hub, modes ----------------------------------------------------------------------------
def test_study_checks_the_device_first(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    start = time.perf_counter()
    assert main(["study", "--device", "cuda", "--dry-run", "--out", str(tmp_path / "s"), "--preset", "tiny"]) == 2
    assert "no CUDA device" in one_error_line(capsys)
    assert time.perf_counter() - start < 5 and not (tmp_path / "s").exists()


def test_hf_data_without_network_fails_fast_and_quietly(monkeypatch, capsys):
    pytest.importorskip("datasets")
    import lexkit.data as D

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(D, "hub_reachable", lambda timeout=1.0: False)
    start = time.perf_counter()
    assert main(["train", "--scheme", "rope", "--out", "unused-run", "--data", "hf:nobody/no-such-dataset",
                 "--preset", "tiny"]) == 2
    assert time.perf_counter() - start < 10
    assert "cannot load 'hf:nobody/no-such-dataset'" in one_error_line(capsys)
    assert os.environ["HF_HUB_OFFLINE"] == "1"  # restored by monkeypatch


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_file_modes_follow_the_umask(made, tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        _train(tmp_path / "m", made / "data", "rope", "--steps", "6")
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "m").iterdir()}
    assert modes == dict.fromkeys(["config.json", "model.safetensors", "checkpoint.safetensors", "metrics.jsonl"], mode)


# -- 8. lexkit runs, presets, --help ----------------------------------------------------------------
def test_runs_lists_each_run(made, tmp_path, capsys):
    stopped = tmp_path / "deep" / "stopped"
    stopped.parent.mkdir()
    stopped.mkdir()
    for f in (made / "rope").iterdir():
        (stopped / f.name).write_bytes(f.read_bytes())
    config = json.loads((stopped / runs.CONFIG).read_text())
    config["train"]["steps"] = 100  # as if it was started for 100 and stopped at 12
    (stopped / runs.CONFIG).write_text(json.dumps(config))
    holder = _holder(tmp_path / "deep")  # not a run: a lock alone is not listed
    try:
        assert main(["runs", str(made)]) == 0
        assert main(["runs", str(tmp_path)]) == 0
    finally:
        holder.kill()
        holder.wait()
    out = capsys.readouterr().out.splitlines()
    bpb = {s: runs.read_metrics(made / s)[-1]["val_bpb"] for s in ("alibi", "rope")}
    assert out[0].split() == ["scheme", "length", "step", "state", "val", "bpb", "ranks", "device", "parent", "size",
                              "path"]
    alibi = next(line for line in out if line.endswith(str(made / "alibi"))).split()
    assert alibi[:5] == ["alibi", "32", "12/12", "finished", f"{bpb['alibi']:.4f}"]
    assert next(line for line in out if line.endswith(str(stopped))).split()[:4] == ["rope", "32", "12/100", "stopped"]
    assert main(["runs", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in one_error_line(capsys)


def test_runs_shows_a_run_being_written(run, capsys):
    holder = _holder(run)
    try:
        assert main(["runs", str(run)]) == 0
    finally:
        holder.kill()
        holder.wait()
    assert capsys.readouterr().out.splitlines()[1].split()[3] == "writing"


def test_help_shows_the_preset_defaults_and_presets_lists_them(capsys):
    from lexkit import presets

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    small = presets.PRESETS["small"]
    for flag, key in (("--steps", "steps"), ("--train-len", "train_len"), ("--batch", "batch")):
        assert re.search(rf"{flag} [A-Z_]+ [^()]*\(default: the preset's, {small[key]} in small\)", text), flag
    assert "default: None" not in text
    assert main(["presets"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()}
    assert rows["setting"][2:] == list(presets.PRESETS)
    assert rows["steps"][2:] == [str(p["steps"]) for p in presets.PRESETS.values()]


def test_checks_number_ranges():
    assert checks.number("--x", 5) == 5 and checks.number("--x", None) is None
    for bad in (0, -1, 2**31 + 1, True, 1.5):
        with pytest.raises(ValueError, match="--x"):
            checks.number("--x", bad)
    assert checks.number("--lr", 0.5, maximum=1.0, integer=False) == 0.5
    for bad in (math.inf, math.nan, -0.1, 0.0, 2.0):
        with pytest.raises(ValueError, match="--lr"):
            checks.number("--lr", bad, maximum=1.0, integer=False)
    assert checks.number("--w", 0, strict=False) == 0


def test_interrupt_releases_the_lock_and_keeps_the_checkpoint(made, tmp_path, capsys, monkeypatch):
    """In-process sibling of the SIGINT test: KeyboardInterrupt at step 9 (after the step-6
    checkpoint) exits 130 and leaves no lock."""
    import lexkit.train as T

    real = T.lr_at

    def interrupted(step, cfg):
        if step == 8:
            raise KeyboardInterrupt
        return real(step, cfg)

    monkeypatch.setattr(T, "lr_at", interrupted)
    out = tmp_path / "int"
    assert main(["train", "--scheme", "rope", "--out", str(out), "--data", str(made / "data"), *TINY]) == 130
    assert one_error_line(capsys) == "error: interrupted"
    assert not (out / ".lock").exists() and runs.trainer_state(out)["step"] == 6


@pytest.mark.slow  # fast sibling: test_interrupt_releases_the_lock_and_keeps_the_checkpoint
def test_sigint_keeps_the_lock_released(made, tmp_path):
    """SIGINT during training: exit 130, a usable run, and no lock left held."""
    out = tmp_path / "int"
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen([sys.executable, "-m", "lexkit", "train", "--scheme", "rope", "--out", str(out),
                             "--data", str(made / "data"), "--preset", "tiny", "--steps", "100000",
                             "--save-every", "5", "--quiet", "--threads", "1"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (out / runs.CHECKPOINT).exists() and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 130 and proc.stderr.read().strip() == "error: interrupted"
    assert not (out / ".lock").exists() and runs.trainer_state(out)["step"] >= 5
