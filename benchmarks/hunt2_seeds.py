"""The hunt, round 2 (docs/hunt.md): every arm on its three seeds, from sweep documents and the per-seed figures
recorded where a seed's runs did not survive (benchmarks/hunt2/recorded.json), read both ways the round reads them:

* pooled over the seeds as independent documents, with the 95 % Wilson interval (the rule pre-registered for B11);
* over seeds, as table G's interval is (lexkit.study.tables.retrieval.queries: the Student t interval of the
  seeds' means, widened to hold the pooled Wilson one), which is the one that speaks for the arm.

Each part (a copy format or a task, exact match at 16x) of each arm is compared with B0's two ways: by the rule
(the arm's pooled figure above the upper end of B0's pooled interval, or below its lower end) and over seeds (the
arm's interval over seeds wholly above or below B0's); ``level`` otherwise. bpb: each seed's paired 16x / 1x ratio,
their mean and t interval over the seeds.

    python benchmarks/hunt2_seeds.py --recorded benchmarks/hunt2/recorded.json hunt2-rest/sweep.json [more.json]
    python benchmarks/hunt2_seeds.py ... --markdown      # the table docs/hunt.md holds
    python benchmarks/hunt2_seeds.py hunt3/sweep.json --base "C0 A3 again"   # round 3: C1 against C0
    python benchmarks/hunt2_seeds.py hunt3/sweep.json --base "C0 A3 again" --by-depth   # each depth at 16x
    python benchmarks/hunt2_seeds.py hunt3-c2/sweep-seed0.json hunt3-c2/sweep.json --multiples 1,4,16 \
        --parts kvthread,kvthread:direction=backward,ordinal    # round 3's C2: each part at 1x, 4x, 16x over seeds
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict

from common import documents_per_cell, md_table, read_sweep
from lexkit.core.stats import mean_interval, wilson

FAR = 16
BASE = "B0 A3 again"


def from_sweep(doc, figures: dict, near: dict) -> int:
    """Add a sweep document's (a :class:`lexkit.study.sweep.SweepResults`, :func:`common.read_sweep`) per-seed
    exact match at 16x (``figures[arm][seed][part]``, in %) and bpb ratio (``bpb_ratio_16x``), and at 1x
    (``near``, likewise); returns the documents per seed and cell (needles per depth x depths)."""
    for entry, part in doc.scored():
        for row in entry.rows:
            if row.multiple in (1, FAR):
                into = (figures if row.multiple == FAR else near)[entry.label].setdefault(entry.seed, {})
                into[part] = 100 * row.accuracy
                if row.ratio is not None and part == "tilde":
                    into["bpb_ratio_16x"] = row.ratio
    return documents_per_cell(doc)


def by_depth(doc) -> dict:
    """A sweep document's exact match at 16x by depth: ``{arm: {part: {depth: {seed: %}}}}`` (its cells)."""
    out: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    far = FAR * doc.section.train_len
    for entry, part in doc.scored():
        for cell in entry.cells:
            if cell.length == far and cell.pattern == entry.pattern:
                out[entry.label][part][cell.depth][entry.seed] = 100 * cell.accuracy
    return out


def depth_table(doc, base: str) -> str:
    """Each arm's exact match at 16x per part and depth, per seed and its mean [95 % over seeds], and where
    it differs from the base arm's over seeds (above/below; level otherwise)."""
    depths = by_depth(doc)
    rows = []
    for arm in sorted(depths, key=lambda a: order(a, base)):
        for part, cells in depths[arm].items():
            row = [arm, part]
            for depth in sorted(cells):
                theirs = depths.get(base, {}).get(part, {}).get(depth) if arm != base else None
                row.append(seeds_cell(cells[depth], doc.section.samples, theirs))
            rows.append(row)
    heads = [f"{d:g} %" for d in sorted(next(iter(next(iter(depths.values())).values())))]
    return md_table(["arm", "part", *heads], rows)


def by_multiple(docs, multiples: list[int]) -> tuple[dict, int]:
    """Sweep documents' exact match per multiple (``{arm: {part: {multiple: {seed: %}}}}``) and their documents per
    seed and cell (one number across them, else an error)."""
    out: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    documents = set()
    for doc in docs:
        documents.add(documents_per_cell(doc))
        for entry, part in doc.scored():
            for row in entry.rows:
                if row.multiple in multiples:
                    out[entry.label][part][row.multiple][entry.seed] = 100 * row.accuracy
    if len(documents) != 1:
        raise SystemExit(f"error: the documents per seed differ between the sweeps ({sorted(documents)})")
    return out, documents.pop()


def multiples_table(docs, multiples: list[int], parts: list[str] | None, base: str) -> str:
    """Each arm's exact match per part at each multiple: per seed, pooled, and its interval over seeds (table G's),
    with where it differs from the base arm's over seeds."""
    table, n = by_multiple(docs, multiples)
    rows = []
    for arm in sorted(table, key=lambda a: order(a, base)):
        for part in (parts or list(table[arm])):
            cells = table[arm].get(part, {})
            row = [arm, part.replace(":direction=backward", " backward")]
            for m in multiples:
                theirs = table.get(base, {}).get(part, {}).get(m) if arm != base else None
                row.append(seeds_cell(cells[m], n, theirs, pooled=True) if cells.get(m) else "-")
            rows.append(row)
    seeds = sorted({s for arm in table.values() for part in arm.values() for m in part.values() for s in m})
    return (md_table(["arm", "part", *(f"{m}x" for m in multiples)], rows)
            + f"\n\nseeds {', '.join(map(str, seeds))}; {n} documents a seed and multiple; "
            "per seed: pooled [95 % over seeds]")


def seeds_cell(seeds: dict[int, float], documents: int, theirs: dict[int, float] | None = None,
               pooled: bool = False) -> str:
    """One cell of a table over seeds: each seed's exact match (%), with ``pooled`` their pooled figure, the
    interval over seeds, and ``above``/``below`` where it lies outside the base arm's (``theirs``) over seeds."""
    r = reading([seeds[s] for s in sorted(seeds)], documents)
    over = r.get("over_seeds")
    text = ("/".join(f"{v:.0f}" for v in r["per_seed"]) + (f": {r['pooled']:.0f}" if pooled else "")
            + (f" [{over[0]:.0f}-{over[1]:.0f}]" if over else ""))
    if over and theirs:
        b = reading([theirs[s] for s in sorted(theirs)], documents).get("over_seeds")
        text += f" {side(over, b)}" if b and side(over, b) != "level" else ""
    return text


def reading(per_seed: list[float], documents: int) -> dict:
    """Per-seed exact match (%) read pooled (Wilson over every document) and over seeds (table G's)."""
    right = round(sum(per_seed) / 100 * documents)
    n = documents * len(per_seed)
    low, high = wilson(right, n)
    out = {"per_seed": per_seed, "pooled": 100 * right / n, "pooled_interval": (100 * low, 100 * high)}
    t = mean_interval([p / 100 for p in per_seed])
    if t is not None:
        out["over_seeds"] = (100 * max(0.0, min(t[0], low)), 100 * min(1.0, max(t[1], high)))
    return out


def order(arm: str, base: str = BASE) -> tuple:
    """The base arm first, then by the number in the arm's first word (B2 before B10)."""
    return arm != base, [int(d) for d in re.findall(r"\d+", arm.split()[0])], arm


def side(arm: tuple[float, float], base: tuple[float, float]) -> str:
    return "above" if arm[0] > base[1] else "below" if arm[1] < base[0] else "level"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweeps", nargs="*", help="sweep.json documents")
    parser.add_argument("--recorded", help="per-seed figures of runs that did not survive (benchmarks/hunt2/)")
    parser.add_argument("--markdown", action="store_true", help="print docs/hunt.md's table")
    parser.add_argument("--by-depth", action="store_true", help="each depth at 16x, per seed and over seeds, against "
                        "the base arm (one sweep document)")
    parser.add_argument("--base", default=BASE, help=f"the arm every other is read against (default: {BASE!r}, "
                        "round 2's; round 3's is 'C0 A3 again')")
    parser.add_argument("--near", action="store_true", help="the sweeps' seeds at 1x -> 16x, pooled (the recorded "
                        "figures have 16x only)")
    parser.add_argument("--multiples", help="each part at these multiples (e.g. 1,4,16), per seed and over seeds")
    parser.add_argument("--parts", help="with --multiples: the parts to read, comma-separated (default: every one)")
    args = parser.parse_args()
    if args.multiples:
        try:
            multiples = [int(m) for m in args.multiples.split(",")]
        except ValueError:
            raise SystemExit(f"error: --multiples {args.multiples!r}: give whole numbers, e.g. 1,4,16") from None
        parts = args.parts.split(",") if args.parts else None
        print(multiples_table([read_sweep(p) for p in args.sweeps], multiples, parts, args.base))
        return
    if args.by_depth:
        if len(args.sweeps) != 1:
            raise SystemExit("error: --by-depth reads one sweep document")
        print(depth_table(read_sweep(args.sweeps[0]), args.base))
        return
    figures: dict[str, dict[int, dict]] = defaultdict(dict)
    near: dict[str, dict[int, dict]] = defaultdict(dict)
    documents, parts = set(), []
    if args.recorded:
        recorded = json.loads(open(args.recorded).read())
        documents.add(recorded["documents"])
        parts = list(recorded["parts"])
        for arm, seeds in recorded["arms"].items():
            for seed, values in seeds.items():
                figures[arm].setdefault(int(seed), {}).update(values)
    for path in args.sweeps:
        doc = read_sweep(path)
        documents.add(from_sweep(doc, figures, near))
        parts += [p for p in (*(doc.section.formats or ["tilde"]), *(doc.section.held_out or []), *doc.tasks)
                  if p not in parts]
    if len(documents) != 1:
        raise SystemExit(f"error: the documents per seed differ between the sources ({sorted(documents)})")
    (n,) = documents
    if args.near:
        rows = []
        for arm in sorted(near, key=lambda a: order(a, args.base)):
            seeds = sorted(near[arm])
            cells = [" -> ".join(f"{sum(d[arm][s][p] for s in seeds) / len(seeds):.0f}" for d in (near, figures))
                     if all(p in near[arm][s] and p in figures[arm][s] for s in seeds) else "-" for p in parts]
            rows.append([arm, ", ".join(map(str, seeds)), *cells])
        print(md_table(["arm", "seeds", *(p.replace(":direction=backward", " backward") for p in parts)], rows))
        return
    read = {arm: {p: reading([seeds[s][p] for s in sorted(seeds)], n) for p in parts
                  if all(p in seeds[s] for s in seeds)} for arm, seeds in figures.items()}
    base = read.get(args.base, {})
    rows = []
    for arm in sorted(figures, key=lambda a: order(a, args.base)):
        seeds = figures[arm]
        ratios = [seeds[s]["bpb_ratio_16x"] for s in sorted(seeds) if "bpb_ratio_16x" in seeds[s]]
        t = mean_interval(ratios)
        bpb = (", ".join(f"{r:.3f}" for r in ratios) + f": {sum(ratios) / len(ratios):.3f}"
               + (f" [{t[0]:.3f}-{t[1]:.3f}]" if t else ""))
        cells = []
        for p in parts:
            r = read[arm].get(p)
            if r is None:
                cells.append("-")
                continue
            over = r.get("over_seeds")
            text = ("/".join(f"{v:.0f}" for v in r["per_seed"]) + f": {r['pooled']:.0f}"
                    + (f" [{over[0]:.0f}-{over[1]:.0f}]" if over else ""))
            if arm != args.base and over and p in base and "over_seeds" in base[p]:
                verdict = side(over, base[p]["over_seeds"])
                rule = side((r["pooled"], r["pooled"]), base[p]["pooled_interval"])
                text += "" if verdict == rule == "level" else f" (rule: {rule}; over seeds: {verdict})"
            cells.append(text)
        if args.markdown:
            rows.append([arm, len(seeds), bpb, *cells])
        else:
            print(f"{arm}\n  seeds {sorted(seeds)}  bpb 16x / 1x {bpb}")
            for p, text in zip(parts, cells):
                print(f"  {p:28s} {text}")
    if args.markdown:
        print(md_table(["arm", "seeds", "bpb 16x / 1x per seed: mean [95 % over seeds]",
                        *(f"{p.replace(':direction=backward', ' backward')} 16x" for p in parts)], rows))


if __name__ == "__main__":
    main()
