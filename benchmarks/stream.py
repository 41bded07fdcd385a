"""Streaming evaluation and KV-cached generation on a CPU: memory flat in the length, speed kept.

    PYTHONPATH=src python benchmarks/stream.py            # ~6-10 min on 2 cores -> docs/benchmarks-stream.md (+ .json)
    PYTHONPATH=src python benchmarks/stream.py --quick    # smoke run: 131,072 bytes instead of 1 MiB

Measured side by side in one run, each case in a fresh child process (peak RSS = the child's
``ru_maxrss`` from ``os.wait4``, so cases never share a high-water mark):

* evaluation of one document with the ``small`` preset model (random init: memory and speed do
  not depend on the weights) under ``window:128`` and ``bca:128``: at 4,096 bytes (one pass), at
  65,536 bytes one-pass and streamed, at 1,048,576 bytes streamed;
* generation bytes/s with the KV cache at 4,096 and 65,536 bytes of context (``window:128``;
  ``causal`` at 4,096 for contrast, whose 65,536-byte prefill alone is quadratic), and without
  the cache at 4,096;
* a baseline child (torch imported, model built) for the memory every case starts from.

Targets: peak RSS at 1,048,576 <= 1.5 GB and flat (within 10% of 65,536 streamed);
bytes/s at 1,048,576 >= 0.8x bytes/s at 4,096.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


# -- one case, in a child process ------------------------------------------------------------------
def child(case: dict) -> dict:
    import torch

    torch.set_num_threads(case["threads"])
    sys.path.insert(0, str(ROOT / "src"))
    from builders import lexkit_model
    from lexkit.evaluate import evaluate
    from lexkit.model.sample import iter_generate

    model = lexkit_model("small", case["scheme"], layout=case.get("layout"))[0].eval()
    g = torch.Generator().manual_seed(1)
    n = case.get("n", 0)
    if case["kind"] == "base":
        return {}
    if case["kind"] == "eval":
        doc = bytes(torch.randint(32, 127, (n,), generator=g).tolist())
        run = lambda: evaluate(model, [doc], [n], case["pattern"], stream=case["stream"])  # noqa: E731
        if n <= 8192:  # short: warm up, then repeat for at least 2 s
            run()
            reps, start = 0, time.perf_counter()
            while reps == 0 or time.perf_counter() - start < 2.0:
                out = run()
                reps += 1
            seconds = (time.perf_counter() - start) / reps
        else:
            start = time.perf_counter()
            out = run()
            seconds = time.perf_counter() - start
        row = out["results"][0]
        return {"seconds": seconds, "bytes_per_s": n / seconds, "bpb": row["bpb"], "streamed": row["streamed"]}
    # generation: a prompt of n bytes, then `new` bytes greedy; bytes/s counts the new bytes only
    prompt = bytes(torch.randint(32, 127, (n - 1,), generator=g).tolist())  # + BOS = n of context
    stream = iter_generate(model, prompt, case["new"], pattern=case["pattern"], temperature=0, cache=case["cache"])
    start = time.perf_counter()
    next(stream)  # the length check and the prefill (with the cache) or the first full pass
    first = time.perf_counter() - start
    start = time.perf_counter()
    count = sum(1 for _ in stream)
    seconds = time.perf_counter() - start
    return {"first_s": first, "seconds": seconds, "bytes_per_s": count / seconds, "generated": count + 1}


def measure(case: dict, timeout: float) -> dict:
    """Run ``case`` in a fresh interpreter; its result plus its own peak RSS in MB (``ru_maxrss``
    of that one child, KiB on Linux, from ``os.wait4``)."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--child", json.dumps(case)], stdout=subprocess.PIPE, stderr=err,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        start = time.time()
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        message = err.read().decode(errors="replace").strip().splitlines()[-1:]
    if proc.returncode != 0:
        return {**case, "error": f"exit {proc.returncode}: {' '.join(message)}"}
    result = json.loads(out.decode().strip().splitlines()[-1])
    return {**case, **result, "peak_rss_mb": usage.ru_maxrss / 1024.0, "wall_s": time.time() - start}


# -- the run ------------------------------------------------------------------------------------
def cases(args) -> list[dict]:
    """The crucial cases first (4,096, then the long one, then 4,096 again to bracket the load)."""
    big = 131072 if args.quick else MIB
    common = dict(scheme=args.scheme, threads=args.threads)
    patterns = ("window:128", "bca:128")
    out = [dict(kind="base", **common)]
    out += [dict(kind="eval", pattern=p, n=4096, stream="auto", when="before", **common) for p in patterns]
    out += [dict(kind="eval", pattern=p, n=big, stream=True, **common) for p in patterns]
    out += [dict(kind="eval", pattern=p, n=4096, stream="auto", when="after", **common) for p in patterns]
    out += [dict(kind="eval", pattern=p, n=65536, stream=True, **common) for p in patterns]
    out += [dict(kind="eval", pattern=p, n=65536, stream=False, **common) for p in patterns]
    new = 64 if args.quick else 256
    out += [
        dict(kind="generate", pattern="window:128", n=4096, new=new, cache=True, **common),
        dict(kind="generate", pattern="window:128", n=65536, new=new, cache=True, **common),
        dict(kind="generate", pattern="causal", n=4096, new=new, cache=True, **common),
        dict(kind="generate", pattern="window:128", n=4096, new=4, cache=False, **common),
    ]
    return out


def targets(rows: list[dict], big: int) -> list[tuple[str, str, bool]]:
    def get(**kw):
        for r in rows:
            if all(r.get(k) == v for k, v in kw.items()) and "error" not in r:
                return r
        return None

    out = []
    for pattern in ("window:128", "bca:128"):
        at_big = get(kind="eval", pattern=pattern, n=big, stream=True)
        at_64k = get(kind="eval", pattern=pattern, n=65536, stream=True)
        at_4k = [r for r in rows
                 if r["kind"] == "eval" and r["pattern"] == pattern and r["n"] == 4096 and "error" not in r]
        if not (at_big and at_64k and at_4k):
            out.append((f"eval {pattern}", "a case failed", False))
            continue
        gb = at_big["peak_rss_mb"] / 1000
        out.append((f"eval {pattern}: peak RSS at {big:,} <= 1.5 GB", f"{gb:.2f} GB", gb <= 1.5))
        ratio = at_big["peak_rss_mb"] / at_64k["peak_rss_mb"]
        out.append((f"eval {pattern}: peak RSS flat, {big:,} vs 65,536 streamed (<= 1.10x)", f"{ratio:.2f}x",
                    ratio <= 1.10))
        speed = at_big["bytes_per_s"] / (sum(r["bytes_per_s"] for r in at_4k) / len(at_4k))
        out.append((f"eval {pattern}: bytes/s at {big:,} >= 0.8x bytes/s at 4,096 (mean of before and after)",
                    f"{speed:.2f}x", speed >= 0.8))
    return out


def render(rows: list[dict], checks, meta: dict) -> str:
    from common import table
    from lexkit.documents.blocks import Heading, Text
    from lexkit.documents.render import markdown

    evals, generated = [], []
    for r in rows:
        if r["kind"] == "eval":
            if "error" in r:
                evals.append([r["pattern"], f"{r['n']:,}", r["stream"], f"error: {r['error']}", "", "", "", ""])
                continue
            mode = ("streamed" if r["streamed"] else "one pass") + (f" ({r['when']})" if "when" in r else "")
            evals.append([r["pattern"], f"{r['n']:,}", mode, f"{r['seconds']:.2f}", f"{r['bytes_per_s']:,.0f}",
                          f"{r['peak_rss_mb']:,.0f}", f"{r['peak_rss_mb'] - meta['base_mb']:,.0f}", f"{r['bpb']:.4f}"])
        elif r["kind"] == "generate":
            if "error" in r:
                generated.append([r["pattern"], f"{r['n']:,}", r["cache"], f"error: {r['error']}", "", "", ""])
                continue
            generated.append([r["pattern"], f"{r['n']:,}", "yes" if r["cache"] else "no", r["generated"],
                              f"{r['first_s']:.2f}", f"{r['bytes_per_s']:,.1f}", f"{r['peak_rss_mb']:,.0f}"])
    return markdown([
        Heading("Streaming evaluation and KV-cached generation (CPU)", 1),
        Text(f"Generated by `benchmarks/stream.py` on {meta['date']} ({meta['machine']}; torch {meta['torch']}, "
             f"{meta['threads']} threads, load average {meta['load_before']} before / {meta['load_after']} after; "
             f"{meta['minutes']:.1f} min). `small` preset model (4 layers, d_model 128, 4 heads), random init, "
             f"scheme `{meta['scheme']}`. Every case ran in its own child process; peak RSS is that child's "
             f"`ru_maxrss`. A bare child (torch imported, model built) peaks at {meta['base_mb']:.0f} MB."),
        *([Text(meta["note"])] if meta.get("note") else []),
        Heading("Targets"),
        table(["target", "measured", ""], [[name, value, "PASS" if ok else "**MISS**"] for name, value, ok in checks]),
        Heading("Evaluation (one document, `lexkit.evaluate.evaluate`)"),
        *([Text("Rows in the order they ran; 4,096 ran before and after the long cases (the load of a shared machine "
                "drifts), and the speed target compares with their mean.")] if any("when" in r for r in rows) else []),
        table(["pattern", "bytes", "mode", "seconds", "bytes/s", "peak RSS MB", "above base MB", "bpb"], evals),
        Heading("Generation (greedy, `lexkit.model.sample.iter_generate`)"),
        Text("bytes/s counts the bytes after the first; *first byte s* includes the length check and, with the "
             "cache, the prefill of the context (in segments of 4,096)."),
        table(["pattern", "context bytes", "cache", "bytes generated", "first byte s", "bytes/s", "peak RSS MB"],
              generated),
        Text("Memory model: a streamed window holds one segment's activations and logits (4,096 tokens) and, per "
             "layer, the keys and values the pattern can still reach (W - 1 under `window:W`, at most W - 1 under "
             "`bca:W`), plus the harness's per-byte state (tokens, inputs, targets, losses, per-position sums: tens "
             "of bytes per byte); the one-pass path holds every layer's activations and the n x 257 logits at once. "
             "See docs/evaluation.md."),
    ])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true", help="131,072 bytes instead of 1,048,576; fewer generated bytes")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--scheme", default="alibi")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per case")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks-stream.md"))
    p.add_argument("--note", help="a paragraph printed under the header (e.g. the machine's load)")
    p.add_argument("--render", metavar="JSON", help="re-render the tables of an earlier run's JSON (with --note)")
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0

    if args.render:
        saved = json.loads(Path(args.render).read_text())
        meta, rows = {**saved["meta"], "note": args.note or saved["meta"].get("note")}, saved["rows"]
        write(Path(args.out), rows, targets(rows, 131072 if meta["quick"] else MIB), meta)
        return 0

    import torch

    start = time.time()
    load_before = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    rows = []
    for case in cases(args):
        row = measure(case, args.timeout)
        rows.append(row)
        print(json.dumps(row), flush=True)
    big = 131072 if args.quick else MIB
    base = next(r for r in rows if r["kind"] == "base")
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "torch": torch.__version__, "threads": args.threads, "scheme": args.scheme,
        "load_before": load_before, "load_after": ", ".join(f"{x:.1f}" for x in os.getloadavg()),
        "minutes": (time.time() - start) / 60, "base_mb": base.get("peak_rss_mb", 0.0), "quick": args.quick,
        "note": args.note,
    }
    write(Path(args.out), rows, targets(rows, big), meta)
    return 0


def write(out: Path, rows: list[dict], checks, meta: dict) -> None:
    out.write_text(render(rows, checks, meta))
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows, "targets": [
        {"target": name, "measured": value, "pass": ok} for name, value, ok in checks]}, indent=2) + "\n")
    for name, value, ok in checks:
        print(f"{'PASS' if ok else 'MISS'}  {name}: {value}")
    print(f"wrote {out} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    sys.exit(main())
