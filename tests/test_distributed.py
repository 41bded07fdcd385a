"""torchrun: batch shares, exactness of DDP and FSDP2 against one process (gloo, 2 CPU processes),
rank-0-only output, resume, one error line, the sharded study.

Fast tests start the ranks by forking this process (:func:`fork_ranks`: torchrun's environment
variables, then ``lexkit.cli.main``; no second import of torch); the slow ones go through the
real ``torchrun``.

Exactness tolerance: the 2-process run averages per-rank mean gradients where one process takes the
mean over the whole batch; the two differ only in float32 summation order. Measured on this machine
(tiny preset, kerple-log, 8 steps with a resume at 4): largest weight difference about 6e-8 (weights
are O(1)); the tests, 4 steps with a resume at 2, allow TOL = 1e-6.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from lexkit.core.errors import DataError
from lexkit.data.corpus import Stream
from lexkit.study import Study, StudyConfig
from lexkit.training import distributed, runs
from lexkit.training.distributed import World
from lexkit.training.loop import train
from lexkit.training.settings import configs
from toy_corpus import DOCS, write_corpus

SRC = str(Path(__file__).resolve().parents[1] / "src")
TOL = 1e-6
#: the model of the exactness tests: a layout with a learnable scheme shared by its layers, a learned sink on the
#: local layer and a learned temperature on the global one (under FSDP2 each lives with its block or the root)
LAYOUT = "kerple-log@window:16+sink;kerple-log@causal+ssmax"
TRAIN = ["--layout", LAYOUT, "--preset", "tiny", "--save-every", "2", "--eval-every", "2", "--threads", "1",
         "--quiet"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("data"))


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    return {**env, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}


def torchrun(*args: str, nproc: int = 2, timeout: float = 240) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc_per_node N -m lexkit ARGS`` (a free port of its own)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "lexkit", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=timeout)


def two_nodes(*args: str, timeout: float = 240) -> list[subprocess.CompletedProcess]:
    """Two single-process "nodes" on this machine meeting through a static rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1", f"--node_rank={node}",
         "--master_addr=127.0.0.1", f"--master_port={port}", "-m", "lexkit", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()) for node in (0, 1)]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def _rank_main(rank: int, size: int, port: int, commands: list[list[str]]) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(size), LOCAL_WORLD_SIZE=str(size),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    from lexkit.cli import main

    code = 0
    for argv in commands:  # one after the other; none after one that fails
        code = main(argv)
        if code:
            break
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def fork_ranks(*argv: str, then: list[str] | None = None, nproc: int = 2, timeout: float = 120) -> list[int]:
    """Run ``lexkit ARGV`` as ``nproc`` ranks forked from this process, with the environment
    torchrun gives; their exit codes (output goes to this process's file descriptors). As torchrun
    does, the first rank to fail has the others killed (exit code -9). ``then``: a second command
    the same ranks run after the first succeeded (one start of the ranks and of their process group
    for two sessions of a run)."""
    import torch._dynamo  # noqa: F401  (AdamW's first step imports it: here once, not in each forked rank)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = multiprocessing.get_context("fork")
    commands = [list(argv)] + ([then] if then else [])
    procs = [ctx.Process(target=_rank_main, args=(rank, nproc, port, commands)) for rank in range(nproc)]
    for p in procs:
        p.start()
    deadline = time.time() + timeout
    while time.time() < deadline and any(p.is_alive() for p in procs):
        if any(p.exitcode not in (None, 0) for p in procs):
            break
        time.sleep(0.02)
    for p in procs:
        if p.is_alive():  # left waiting for a failed rank
            p.kill()
        p.join()
    return [p.exitcode for p in procs]


def errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


# -- shares of a batch, the world from the environment --------------------------------------------------
@pytest.mark.parametrize("size", [1, 2, 4])
def test_ranks_hold_disjoint_contiguous_rows_of_the_global_batch(size):
    stream = Stream(DOCS)
    x, y = stream.batch(7, 8, 16, seed=3)
    parts = [stream.batch(7, 8, 16, seed=3, rows=World(r, size).rows(8)) for r in range(size)]
    assert [p[0].shape[0] for p in parts] == [8 // size] * size
    assert torch.equal(torch.cat([p[0] for p in parts]), x) and torch.equal(torch.cat([p[1] for p in parts]), y)
    covered = [i for r in range(size) for i in range(8)[World(r, size).rows(8)]]
    assert covered == list(range(8))


def test_batch_must_divide_by_the_world_size():
    World(1, 4).check_batch(8)
    with pytest.raises(ValueError, match=r"--batch 10 .* world size 4.* e\.g\. 8"):
        World(1, 4).check_batch(10)


def test_world_from_the_environment(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert distributed.world() == distributed.SINGLE and not distributed.SINGLE.parallel
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert distributed.world() == World(rank=2, size=4, local_rank=0)
    assert not distributed.reports(ValueError("x"))  # rank 0 prints
    assert distributed.reports(distributed.LocalError("x"))  # ... except a rank's own failure
    monkeypatch.setenv("RANK", "0")
    assert distributed.reports(ValueError("x"))
    monkeypatch.setenv("RANK", "4")
    with pytest.raises(ValueError, match="RANK=4 / WORLD_SIZE=4"):
        distributed.world()


def test_fsdp_without_torchrun_is_refused(tmp_path, data_dir):
    model_cfg, train_cfg = configs("tiny", "rope", steps=2, data=str(data_dir))
    with pytest.raises(ValueError, match=r"world size 1\): it needs torchrun with more than one rank"):
        train(tmp_path / "run", model_cfg, train_cfg, progress=False, fsdp=True, world=distributed.SINGLE)
    assert not (tmp_path / "run").exists()


# -- exactness against one process ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def reference(tmp_path_factory, data_dir):
    """One process: 2 steps, then resumed to 4 (the runs the torchrun jobs must reproduce)."""
    out = tmp_path_factory.mktemp("one") / "run"
    common = dict(save_every=2, eval_every=2, data=str(data_dir), layout=LAYOUT)
    train(out, *configs("tiny", "kerple-log", steps=2, **common), progress=False, threads=1, world=distributed.SINGLE)
    train(out, *configs("tiny", "kerple-log", steps=4, **common), resume=True, progress=False, threads=1,
          world=distributed.SINGLE)
    return out


def _max_difference(a: Path, b: Path, name: str) -> float:
    ta, tb = load_file(str(a / name)), load_file(str(b / name))
    assert sorted(ta) == sorted(tb)
    return max((ta[k].double() - tb[k].double()).abs().max().item() for k in ta if k != "rng.torch")


def _same_as_reference(out: Path, reference: Path) -> None:
    assert {p.name for p in out.iterdir()} == {"config.json", "model.safetensors", "checkpoint.safetensors",
                                                "metrics.jsonl"}
    assert _max_difference(out, reference, "model.safetensors") <= TOL
    assert _max_difference(out, reference, "checkpoint.safetensors") <= TOL  # AdamW state too
    ours, theirs = runs.read_metrics(out), runs.read_metrics(reference)
    assert [r["step"] for r in ours] == [r["step"] for r in theirs] == [2, 4]
    for a, b in zip(ours, theirs):  # the logged loss is the global batch's
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-5) and a["val_bpb"] == pytest.approx(b["val_bpb"], abs=1e-5)
    model, _ = runs.load(out)  # plain safetensors, one device
    assert next(model.parameters()).device.type == "cpu"


def test_ddp_then_fsdp_resume_reach_the_one_process_weights(tmp_path, data_dir, reference, capfd):
    """2 ranks: 2 steps under DDP, then resumed to 4 under FSDP2 (checkpoints hold whole tensors,
    so a run may change between the two); same weights and AdamW state as one process. Both
    sessions in one start of the ranks: the resume reads the run from its directory alone, as the
    one-process reference's does (resumes in processes of their own: the torchrun tests, slow)."""
    out = tmp_path / "run"
    args = ["train", "--out", str(out), "--data", str(data_dir), *TRAIN]
    assert fork_ranks(*args, "--steps", "2", then=[*args, "--resume", "--steps", "4", "--fsdp"]) == [0, 0]
    said = [line for line in capfd.readouterr().out.splitlines() if line.startswith(str(out))]
    assert len(said) == 2 and "4 steps" in said[1]  # rank 0 alone, once per session
    _same_as_reference(out, reference)
    origin = json.loads((out / runs.CONFIG).read_text())["provenance"]  # how it was produced
    assert (origin["world_size"], origin["backend"], origin["device"]["count"]) == (2, "gloo", 2)
    assert origin["previous"][0]["world_size"] == 2 and origin["wall_seconds"] > 0  # the DDP session kept
    from lexkit.cli import main

    assert main(["runs", str(out)]) == 0
    assert capfd.readouterr().out.splitlines()[1].split()[6:8] == ["2", "cpu"]  # ranks, device


#: the position drop (step 3 of 4, the global layer) and the reset of unseen bytes' rows (every 2 steps: before it
#: and after)
DROP = ["--layout", "rope@window:8;rope", "--drop-positions-at", "0.75", "--drop-layers", "global", "--untied-head",
        "--preset", "tiny", "--steps", "4", "--save-every", "4", "--eval-every", "4", "--threads", "1", "--quiet"]


@pytest.mark.parametrize("mode", ["ddp", pytest.param("fsdp", marks=pytest.mark.slow)])  # fast sibling: ddp
def test_the_position_drop_and_the_row_resets_on_two_ranks_match_one_process(tmp_path, data_dir, mode):
    """The drop rebuilds the model on every rank from the gathered weights and AdamW state and spreads
    it again (DDP, or FSDP2's shards); the ranks' seen bytes are joined before each reset (DDP; FSDP2
    refuses resets). Same weights and AdamW state as one process."""
    extra = [] if mode == "fsdp" else ["--reset-unseen", "2"]
    one, two = tmp_path / "one", tmp_path / "two"
    from lexkit.cli import main

    assert main(["train", "--out", str(one), "--data", str(data_dir), *DROP, *extra]) == 0
    ranks = ["--fsdp"] if mode == "fsdp" else []
    assert fork_ranks("train", "--out", str(two), "--data", str(data_dir), *DROP, *extra, *ranks) == [0, 0]
    assert _max_difference(one, two, "model.safetensors") <= TOL
    assert _max_difference(one, two, "checkpoint.safetensors") <= TOL
    model, _ = runs.load(two)
    assert [m.name for m in model.layer_schemes] == ["rope", "none"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ddp", "fsdp", "two-nodes"])
def test_two_processes_reach_the_one_process_weights(tmp_path, data_dir, reference, mode):
    """Through the real torchrun (fast sibling: the forked test above)."""
    out = tmp_path / "run"
    args = ["train", "--out", str(out), "--data", str(data_dir), *TRAIN] + (["--fsdp"] if mode == "fsdp" else [])
    launch = (lambda *a: two_nodes(*a)) if mode == "two-nodes" else (lambda *a: [torchrun(*a)])
    for extra in (["--steps", "2"], ["--resume", "--steps", "4"]):
        results = launch(*args, *extra)
        for r in results:
            assert r.returncode == 0, r.stderr[-3000:]
        said = [line for r in results for line in r.stdout.splitlines() if line.startswith(str(out))]
        assert len(said) == 1  # rank 0 only
    _same_as_reference(out, reference)


def test_batch_not_dividing_is_one_error_line_on_forked_ranks(tmp_path, data_dir, capfd):
    out = tmp_path / "run"
    codes = fork_ranks("train", "--out", str(out), "--data", str(data_dir), *TRAIN, "--batch", "7")
    assert codes[0] == 2 and all(code != 0 for code in codes), codes
    lines = errors(capfd.readouterr().err)
    assert len(lines) == 1 and "--batch 7" in lines[0] and "world size 2" in lines[0], lines
    assert not out.exists()


@pytest.mark.slow  # fast sibling: test_batch_not_dividing_is_one_error_line_on_forked_ranks
def test_batch_not_dividing_is_one_error_line(tmp_path, data_dir):
    out = tmp_path / "run"
    r = torchrun("train", "--out", str(out), "--data", str(data_dir), *TRAIN, "--batch", "7", timeout=120)
    assert r.returncode != 0
    lines = errors(r.stderr)
    assert len(lines) == 1 and "--batch 7" in lines[0] and "world size 2" in lines[0], r.stderr[-2000:]
    assert not out.exists()


def test_rank0_errors_end_every_rank_with_one_line(tmp_path, data_dir, capfd):
    """Rank 0 alone reads the run to resume: its error reaches rank 1, which stops too, silently."""
    out = tmp_path / "nothing"
    assert fork_ranks("train", "--resume", "--out", str(out), "--threads", "1") == [2, 2]
    lines = errors(capfd.readouterr().err)
    assert len(lines) == 1 and "does not exist" in lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("fsdp", [False, True])
def test_sigkill_of_the_whole_job_then_resume(tmp_path, data_dir, fsdp):
    """Kill every process of a torchrun job after its first checkpoint; a resumed job ends at the
    one-process run's weights. Fast sibling: the resume in test_two_processes_reach_the_one_process_weights."""
    out, steps = tmp_path / "killed", "60"
    args = ["train", "--scheme", "kerple-log", "--preset", "tiny", "--data", str(data_dir), "--steps", steps,
            "--save-every", "5", "--eval-every", "30", "--threads", "1", "--quiet"] + (["--fsdp"] if fsdp else [])
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                             "-m", "lexkit", *args, "--out", str(out)], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 180
    while not (out / runs.CHECKPOINT).exists() and time.time() < deadline:
        time.sleep(0.05)
    job = [*_children(proc.pid), proc.pid]  # torchrun starts its workers in sessions of their own
    assert len(job) == 3
    for pid in job:  # the whole job at once: the workers and the agent
        os.kill(pid, signal.SIGKILL)
    proc.wait()
    _wait_gone(job)
    step = runs.trainer_state(out)["step"]
    assert 5 <= step < 60
    resumed = torchrun("train", "--resume", "--out", str(out), "--threads", "1", "--quiet",
                       *(["--fsdp"] if fsdp else []))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    whole = tmp_path / "whole"
    train(whole, *configs("tiny", "kerple-log", steps=60, save_every=5, eval_every=30, data=str(data_dir)),
          progress=False, threads=1, world=distributed.SINGLE)
    assert _max_difference(out, whole, "model.safetensors") <= TOL
    assert [r["step"] for r in runs.read_metrics(out)][-1] == 60


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _wait_gone(pids: list[int], timeout: float = 10) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and any(Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) for pid in pids):
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


# -- the sharded study ---------------------------------------------------------------------------------
def test_study_shards_cells_over_ranks_and_rank0_reports(tmp_path, data_dir, capfd, no_figures, monkeypatch):
    monkeypatch.setattr(Study, "POLL", 0.05)  # rank 0 looks for rank 1's cell every 50 ms, not every 2 s
    out = tmp_path / "study"
    args = ["study", "--preset", "tiny", "--scheme", "alibi", "--scheme", "rope", "--pattern", "causal",
            "--lengths", "16,32", "--steps", "3", "--data", str(data_dir), "--eval-docs", "2", "--out", str(out),
            "--threads", "1", "--quiet", "--no-extension", "--no-retrieval"]
    assert fork_ranks(*args) == [0, 0]
    assert capfd.readouterr().out.count("report: ") == 1  # rank 0 alone reports
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    trained = {e["name"].split("-")[0]: e["rank"] for e in log if e["task"] == "train"}
    assert trained == {"alibi": 0, "rope": 1} and all(e["action"] == "ran" for e in log)
    assert len(log) == 2 * 4  # each cell's four tasks, once, by its own rank
    saved = json.loads((out / "results.json").read_text())
    assert [run["scheme"] for run in saved["runs"]] == ["alibi", "rope"]
    origin = saved["provenance"]  # the study's own: its ranks, device, versions and time
    assert origin["world_size"] == 2 and origin["device"] == {"type": "cpu", "name": origin["device"]["name"],
                                                               "count": 2}
    assert {"lexkit_version", "torch_version", "git_commit", "started", "finished"} <= set(origin)
    assert origin["wall_seconds"] > 0 and origin["backend"] is None  # the ranks share no process group
    # a re-run (one process) finds everything cached and the same results
    cfg = StudyConfig(preset="tiny", schemes=["alibi", "rope"], patterns=["causal"], lengths=[16, 32], steps=3,
                      data=str(data_dir), eval_docs=2, extension=False, retrieval=False)
    again = Study(cfg, out, progress=False, echo=None, world=distributed.SINGLE)
    assert [run.to_json() for run in again.run().runs] == saved["runs"]
    assert {e["action"] for e in again.record} == {"cached"}


def test_a_failing_cell_stops_the_study_with_its_rank_named(tmp_path, data_dir, capfd, monkeypatch):
    """No collective joins a study's ranks: rank 1's own failure is printed by rank 1, once."""
    real = Study.run_cell

    def run_cell(self, cell):
        if cell.label == "rope":
            raise DataError("the disk is gone")
        return real(self, cell)

    monkeypatch.setattr(Study, "run_cell", run_cell)  # inherited by the forked ranks
    codes = fork_ranks("study", "--preset", "tiny", "--scheme", "alibi", "--scheme", "rope", "--pattern", "causal",
                       "--lengths", "16,32", "--steps", "2", "--data", str(data_dir), "--eval-docs", "1",
                       "--out", str(tmp_path / "study"), "--threads", "1", "--quiet", "--no-retrieval")
    assert codes[1] == 2 and codes[0] != 0  # rank 0, left waiting for rope, is stopped as torchrun would
    lines = errors(capfd.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith("error: rank 1: rope-s0-")
    assert lines[0].endswith(": the disk is gone")
