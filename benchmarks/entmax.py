"""α-entmax's threshold at α = 1.5 by one sort of the row (closed form) against 50 bisection halvings, on ONE
thread, side by side: the weights alone on causal rows of n keys, and a forward pass of the hunt's B4 model
(ASEntmax on its global layer, table G's size) over one document of n bytes, as retrieval scores it at 1x to
16x. Repetitions alternate which way goes first; the ratio is the median of the per-repetition ratios.

    python benchmarks/entmax.py --out docs/benchmarks-entmax.md
    python benchmarks/entmax.py --render docs/benchmarks-entmax.json --out docs/benchmarks-entmax.md  # no measurement
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from builders import lexkit_model
from common import cpu_facts, table, write_report
from lexkit.attention.modifiers import entmax
from lexkit.documents.blocks import Heading, Text
from lexkit.documents.render import markdown
from lexkit.study.recipe import RECIPE

B4 = "rope@window:16+shift;none@causal+asscale+shift+kshift+entmax"
LENGTHS = (64, 256, 1024)


def timed(fn, repeats: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def both_ways(make, reps: int, repeats: int) -> tuple[float, float, list[float]]:
    """(seconds sorted, seconds bisected, per-repetition ratios bisected / sorted): ``make(exact)`` the
    call with the closed form on (``exact`` True) or off."""
    sorted_s, bisect_s, ratios = [], [], []
    for r in range(reps):
        order = (True, False) if r % 2 == 0 else (False, True)
        got = {}
        for exact in order:
            entmax.EXACT = (1.5, 2.0) if exact else ()
            got[exact] = timed(make, repeats)
        entmax.EXACT = (1.5, 2.0)
        sorted_s.append(got[True])
        bisect_s.append(got[False])
        ratios.append(got[False] / got[True])
    return statistics.median(sorted_s), statistics.median(bisect_s), ratios


def render(data: list[dict], facts: dict) -> str:
    """The report of :func:`main`'s measurements (``data``: one dict a case, as its JSON keeps them)."""
    rows = []
    for d in data:
        case = f"weights, 4 heads x {d['n']} x {d['n']}" if d["case"] == "weights" else \
            f"B4 model forward, 1 x {d['n']} bytes"
        ratios = d["ratios"]
        rows.append([case, f"{d['sorted_s'] * 1e3:.1f}", f"{d['bisect_s'] * 1e3:.1f}",
                     f"{statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]"])
    return markdown([
        Heading("α-entmax at α = 1.5: one sort against 50 bisection halvings (one thread)", 1),
        Text(f"`python benchmarks/entmax.py` on {facts['cpu']}, torch {facts['torch']}, one thread, {facts['date']} "
             f"(load average at the start {facts['load_average_start']}): median of {len(data[0]['ratios'])} "
             "alternating repetitions."),
        table(["case", "sorted (ms)", "bisection (ms)", "bisection / sorted [per repetition]"], rows)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="docs/benchmarks-entmax.md")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--render", metavar="JSON", default=None,
                        help="write --out from the JSON of an earlier run (no measurement)")
    args = parser.parse_args()
    if args.render is not None:
        saved = json.loads(Path(args.render).read_text())
        write_report(args.out, render(saved["rows"], saved["facts"]), saved)
        return
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = []
    for n in LENGTHS:
        z = torch.randn(1, 4, n, n) * 3  # one document, 4 heads: the global layer's scores
        visible = torch.ones(n, n, dtype=torch.bool).tril()
        idx = torch.arange(n)
        s, b, ratios = both_ways(lambda z=z, v=visible, i=idx: entmax.entmax_weights(z, v, i, i), args.reps,
                                 3 if n >= 1024 else 20)
        data.append({"case": "weights", "n": n, "sorted_s": s, "bisect_s": b, "ratios": ratios})
    model = lexkit_model(RECIPE.preset, layout=B4, train_len=64, seed=None)[0].eval()
    for n in LENGTHS:
        tokens = torch.randint(0, 256, (1, n))

        def forward(tokens=tokens):
            with torch.inference_mode():
                model(tokens, kernel="dense")

        s, b, ratios = both_ways(forward, args.reps, 2 if n >= 1024 else 10)
        data.append({"case": "B4 forward", "n": n, "sorted_s": s, "bisect_s": b, "ratios": ratios})
    facts = cpu_facts(1)
    text = render(data, facts)
    write_report(args.out, text, {"facts": facts, "rows": data})
    print(text)


if __name__ == "__main__":
    main()
