"""Table G with seeds and held-out formats, from a results.json made by formulas: lines pooled over
seeds and formats (the Wilson interval of the needles pooled, the seeds' range), a configuration
that did not learn at 1x marked and not ranked past it, the format-bound finding, differences
stated only where intervals and seeds are apart."""

from __future__ import annotations

import math

import pytest

from lexkit.study import read
from lexkit.study.tables.retrieval import queries as query
from lexkit.study.tables.retrieval.findings import difference_findings, format_findings, learning_findings
from lexkit.study.tables.retrieval.queries import retrieval_lines, separated
from lexkit.study.tables.retrieval.report import format_table, interval_table, retrieval_table
from study_results import TRAIN_LEN, study_results

MULTIPLES = [1, 2, 4, 8, 16]
DEPTHS = [0.0, 50.0, 100.0]
SAMPLES = 20
HELD = ["python", "hex", "caret"]


def exact(label: str, held: bool, seed: int, m: int) -> float:
    """Made-up exact match: rope and xpos learn (xpos keeps more at 2x), alibi is format-bound at
    1x, none learns nothing; seeds differ by 5 points at 2x."""
    if label == "none":
        return 0.0
    if m == 1:
        return {"rope": 1.0, "xpos": 0.95, "alibi": 0.3 if held else 1.0}[label]
    if m == 2:
        return {"rope": 0.1, "xpos": 0.6, "alibi": 0.0}[label] + 0.05 * seed
    return 0.0


def table_g() -> dict:
    res = study_results()
    configs = []
    for label in ("rope", "xpos", "alibi", "none"):
        for seed in range(3):
            for fmt in ["tilde", *HELD]:
                held = fmt != "tilde"
                cells = [{"task": "copy", "pattern": "causal", "length": m * TRAIN_LEN, "depth": d, "samples": SAMPLES,
                          "correct": round(SAMPLES * exact(label, held, seed, m)),
                          "accuracy": exact(label, held, seed, m), "answer_bits": 1.0 + seed}
                         for m in MULTIPLES for d in DEPTHS]
                rows = [{"config": label, "pattern": "causal", "multiple": m, "length": m * TRAIN_LEN,
                         "accuracy": exact(label, held, seed, m), "low": 0.0, "high": 1.0, "answer_bits": 1.0,
                         "bpb": {1: 2.0 + seed, 16: 2.5}.get(m)} for m in MULTIPLES]
                configs.append({"label": label, "kind": "scheme", "scheme": label, "logn": False, "pattern": "causal",
                                "run": f"runs/mix-{label}-s{seed}", "rows": rows, "cells": cells, "seed": seed,
                                "format": fmt, "held_out": held})
    res["retrieval"].update(configs=configs, seeds=3, formats=["tilde"], held_out=HELD, samples=SAMPLES,
                            depths=DEPTHS, multiples=MULTIPLES)
    return res


def wilson(k: int, n: int) -> tuple[float, float]:
    z = 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (0.0 if k == 0 else centre - half), (1.0 if k == n else centre + half)


def test_lines_pool_seeds_and_formats_with_their_interval_and_spread():
    doc = read(table_g())
    held = {r.label: r for r in retrieval_lines(doc, "held-out")}
    rope = held["rope"]
    n = 3 * len(HELD) * len(DEPTHS) * SAMPLES  # seeds x formats x depths x needles
    k = sum(round(SAMPLES * exact("rope", True, s, 2)) for s in range(3)) * len(HELD) * len(DEPTHS)
    assert rope.needles[2] == n and rope.accuracy[2] == pytest.approx(k / n)
    assert (rope.low[2], rope.high[2]) == pytest.approx(wilson(k, n))
    assert rope.spread[2] == pytest.approx((0.1, 0.2)) and rope.seeds == 3 and rope.formats == tuple(HELD)
    assert rope.bpb[1] == pytest.approx(3.0) and rope.answer_bits[1] == pytest.approx(2.0)  # means over seeds
    assert {r.label: r.learned for r in retrieval_lines(doc, "trained")} == {
        "rope": True, "xpos": True, "alibi": False, "none": False}  # judged on the held-out formats
    lines = retrieval_lines(doc, None)
    assert [(r.label, r.group) for r in lines[:2]] == [("rope", "trained"), ("rope", "held-out")]


def test_a_configuration_that_did_not_learn_is_marked_and_not_ranked_past_1x():
    doc = read(table_g())
    table = retrieval_table(doc)
    assert table.header[:5] == ["configuration", "pattern", "formats", "seeds", "learned at 1x"]
    alibi = [i for i, r in enumerate(table.rows) if r[0] == "alibi"]
    assert [table.rows[i][4] for i in alibi] == ["no", "no"]
    first = table.header.index("exact 1x (%)")
    for i in alibi:
        assert table.values[i][first] is not None  # 1x: ranked
        assert all(v is None for v in table.values[i][first + 1 : first + len(MULTIPLES)])  # beyond: never
    assert table.rows[alibi[1]][2] == "held-out (python, hex, caret)" and table.rows[alibi[1]][first] == "30 (30-30)"
    rope = next(i for i, r in enumerate(table.rows) if r[0] == "rope" and r[2] == "trained")
    assert table.rows[rope][first + 1] == "15 (10-20)" and table.values[rope][first + 1] == 0.15
    held, trained = 3 * len(HELD) * len(DEPTHS) * SAMPLES, 3 * len(DEPTHS) * SAMPLES

    def interval(k, n):
        return "-".join(f"{100 * v:.0f}" for v in wilson(k, n))

    assert learning_findings(doc) == [
        f"alibi: **did not learn at 1x** (held-out formats 30 % [{interval(round(0.3 * held), held)}, seeds 30-30 %], "
        f"trained format 100 % [{interval(trained, trained)}, seeds 100-100 %]); its longer lengths are not ranked.",
        f"none: **did not learn at 1x** (held-out formats 0 % [{interval(0, held)}, seeds 0-0 %], trained format 0 % "
        f"[{interval(0, trained)}, seeds 0-0 %]); its longer lengths are not ranked.",
    ]
    assert interval_table(doc).rows[0][3] == str(3 * len(DEPTHS) * SAMPLES)  # trained: 1 format
    assert [r[2] for r in format_table(doc).rows[:4]] == ["tilde", *HELD]


def test_format_bound_and_differences_only_where_intervals_and_seeds_are_apart():
    doc = read(table_g())
    bound = format_findings(doc)
    assert len(bound) == 1 and bound[0].startswith("alibi (causal): **format-bound** at 1x (1x: trained 100 %")
    lines = difference_findings(doc)
    # among the rows that learned (rope, xpos): apart at 2x (60-70 % against 10-20 %), not at 1x
    assert "causal at 1x (rope 100 %, xpos 95 %): apart beyond doubt: rope > xpos." in lines
    assert "causal at 2x (xpos 65 %, rope 15 %): apart beyond doubt: xpos > rope." in lines
    assert "causal at 16x (rope 0 %, xpos 0 %): no two rows apart beyond doubt." in lines
    held = {r.label: r for r in retrieval_lines(doc, "held-out")}
    assert separated(held["xpos"], held["rope"], 2) and not separated(held["xpos"], held["rope"], 16)
    # the same intervals, but one seed of each reaching the other's: not apart
    xpos = held["xpos"]
    close = type(xpos)(**{**xpos.__dict__, "spread": {**xpos.spread, 2: (0.15, 0.7)}})
    assert not separated(close, held["rope"], 2)


def test_the_goal_ranks_only_configurations_that_learned():
    doc = read(table_g())
    goal = query.context_goal(doc)
    assert {s.line.label for s in goal.scored} == {"rope", "xpos", "alibi", "none"}
    assert goal.nearest.line.learned and goal.best_retrieval.line.learned and goal.met == []
