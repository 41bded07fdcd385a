"""Long evaluation: one sequence of n bytes per measurement, each in a fresh child process (this
file run as a script) under an address-space cap, timed and measured for peak resident memory."""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from builders import lexkit_model, xt_model
from common import random_document
from contenders import PATTERNS, SIZE, Settings, model_config

MB = 1024 * 1024


def eval_jobs(settings: Settings) -> list[dict]:
    """Every measurement, in an order that interleaves lengths (so 4,096 and 65,536 see alike
    load: repetitions walk the lengths up, then down). Flex and x-transformers run once."""
    jobs = []
    for rep in range(settings.eval_reps):
        for n in settings.lengths if rep % 2 == 0 else settings.lengths[::-1]:
            jobs += lexkit_jobs(settings, n, flex=settings.flex and rep == 0)
        if rep == 0:
            jobs += [xt_job(settings, n) for n in settings.xt_lengths]
    return jobs


def lexkit_jobs(settings: Settings, n: int, flex: bool) -> list[dict]:
    """alibi under window and bca; the other schemes under window (the same kernel cost)."""
    jobs = []
    for scheme in settings.eval_schemes:
        for pattern in PATTERNS if scheme == "alibi" else PATTERNS[:1]:
            job = {"lib": "lexkit", "scheme": scheme, "pattern": pattern, "n": n}
            jobs.append({**job, "kernel": "auto", "runs": settings.eval_runs})
            if flex and scheme == "alibi":
                jobs.append({**job, "kernel": "flex", "runs": 2})  # compile + one steady run
    return jobs


def xt_job(settings: Settings, n: int) -> dict:
    return {"lib": "x-transformers", "scheme": "alibi", "pattern": PATTERNS[0], "kernel": "dense local mask",
            "n": n, "runs": settings.xt_runs}


def bench_eval(settings: Settings, threads: int, guard_gb: float, timeout: float, log) -> list[dict]:
    rows = []
    for job in eval_jobs(settings):
        row = run_child({**job, "threads": threads}, guard_gb, timeout)
        rows.append(row)
        what = f"{row['lib']} {row['scheme']} {row['pattern']} {row['kernel']} n={row['n']:,}"
        if "error" in row:
            log(f"eval {what}: {row['error']}")
        else:
            log(f"eval {what}: {row['steady_s']:.2f} s (first {row['first_s']:.2f} s), {row['bytes_per_s']:,.0f} B/s, "
                f"peak {row['peak_mb']:,.0f} MB")
    return rows


def summarize_eval(rows: list[dict]) -> list[dict]:
    """One row per (lib, scheme, pattern, kernel, n): medians over repetitions."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["lib"], row["scheme"], row["pattern"], row["kernel"], row["n"]), []).append(row)
    out = []
    for (lib, scheme, pattern, kernel, n), items in groups.items():
        ok = [r for r in items if "error" not in r]
        entry = {"lib": lib, "scheme": scheme, "pattern": pattern, "kernel": kernel, "n": n, "measurements": len(items)}
        if ok:  # times: medians; memory: the worst repetition
            entry.update({key: statistics.median(r[key] for r in ok)
                          for key in ("first_s", "steady_s", "bytes_per_s", "baseline_mb")})
            entry["peak_mb"] = max(r["peak_mb"] for r in ok)
        else:
            entry.update(error=items[0]["error"], peak_mb=max(r.get("peak_mb", 0) for r in items))
        out.append(entry)
    return sorted(out, key=lambda e: (e["lib"] != "lexkit", e["scheme"], e["pattern"], e["kernel"], e["n"]))


# -- the parent's side of a child ----------------------------------------------------------------
def run_child(job: dict, guard_gb: float, timeout: float) -> dict:
    """Run one measurement in a fresh interpreter under an address-space cap."""
    limit = int(guard_gb * 1024**3)

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS="1", OMP_NUM_THREADS=str(job["threads"]))
    cmd = [sys.executable, str(Path(__file__).resolve()), json.dumps(job)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=cap, env=env)
    except subprocess.TimeoutExpired:
        return {**job, "error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return {**job, **json.loads(line)}
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {**job, "error": f"exit {proc.returncode}: {tail[:200]}"}


# -- the child ---------------------------------------------------------------------------------
def maxrss_mb() -> float:
    """This process's peak resident memory, MB. VmHWM belongs to the address space, which exec
    replaces; ru_maxrss would carry over the parent's resident size at fork."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / MB if sys.platform == "darwin" else peak / 1024  # bytes on macOS, kB elsewhere


def child_main(job: dict) -> None:
    """Build the model, time ``runs`` evaluations of one n-byte sequence, print one JSON line."""
    torch.set_num_threads(job["threads"])
    torch.manual_seed(0)
    doc = random_document(job["n"])
    evaluate_once = lexkit_evaluator(job, doc) if job["lib"] == "lexkit" else xt_evaluator(job, doc)
    baseline = maxrss_mb()
    times = []
    try:
        for _ in range(job["runs"]):
            start = time.perf_counter()
            evaluate_once()
            times.append(time.perf_counter() - start)
    except (RuntimeError, MemoryError, ValueError) as exc:
        out = {"error": short_error(exc)}
    else:
        steady = statistics.median(times[1:]) if len(times) > 1 else times[0]
        out = {"first_s": times[0], "steady_s": steady, "bytes_per_s": job["n"] / steady}
    out.update(baseline_mb=baseline, peak_mb=maxrss_mb())
    print(json.dumps(out))


def short_error(exc: BaseException) -> str:
    text = str(exc)
    if "can't allocate memory" in text or isinstance(exc, MemoryError):
        return "out of memory under the address-space cap"
    return f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else ''}"


def lexkit_evaluator(job: dict, doc: bytes):
    from lexkit.evaluate import evaluate

    model, _ = lexkit_model(SIZE, job["scheme"])
    model.eval()
    return lambda: evaluate(model, [doc], [job["n"]], job["pattern"], kernel=job["kernel"])


def xt_evaluator(job: dict, doc: bytes):
    """The same work as lexkit's evaluate at one window: forward, float64 NLL."""
    from lexkit.data.corpus import encode

    model = xt_model(model_config(job["scheme"]), max_attend_past=int(job["pattern"].split(":")[1]) - 1).eval()
    tokens = encode(doc).to(torch.int64)
    x, y = tokens[None, :-1], tokens[1:]

    def run() -> float:
        with torch.inference_mode():
            return F.cross_entropy(model(x).double().flatten(0, 1), y).item()

    return run


if __name__ == "__main__":
    child_main(json.loads(sys.argv[1]))
