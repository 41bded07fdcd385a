"""Report tables from results.json alone: seeds aggregate to mean ± sample standard deviation,
unavailable cells read n/a, and Table D's ratios follow from the bpb cells."""

import math

from lexkit.report import length_table, markdown, pattern_table
from lexkit.results import principles


def run(scheme, seed, bpb_by_length, relative=True):
    results = [{"length": n, "pattern": p, "bpb": v, "ppl": None if v is None else math.exp(v * math.log(2)),
                "bytes": 10}
               for (p, n), v in bpb_by_length.items()]
    return {"scheme": scheme, "seed": seed, "relative": relative, "family": "bias", "run": "runs/x",
            "eval": {"results": results, "by_position": [], "documents": 2, "bytes_per_document": 64},
            "resolution": [], "principles": {"order_variance": 0.5, "translation": 0.0}}


def results(runs):
    return {"train_len": 16, "lengths": [16, 64, 256], "patterns": ["causal", "window:16"], "runs": runs,
            "resolution_lengths": [16], "analytic": [], "config": {"seeds": 2, "resolution_texts": 1},
            "data": {"spec": "toy", "fingerprint": {"files": 1, "bytes": 10}},
            "model": {"n_layers": 1, "d_model": 8, "n_heads": 2},
            "params": 100, "train": {"steps": 1, "batch": 1, "lr": 0.1}, "wall_seconds": 1.0,
            "work": {"ran": 1, "cached": 0}, "lexkit": "0", "torch": "0"}


def test_seeds_give_mean_and_sample_std():
    a = run("alibi", 0, {("causal", 16): 2.0, ("causal", 64): 2.0, ("causal", 256): None,
                         ("window:16", 64): 1.0, ("window:16", 256): 1.0})
    b = run("alibi", 1, {("causal", 16): 3.0, ("causal", 64): 4.0, ("causal", 256): None,
                         ("window:16", 64): 1.5, ("window:16", 256): 2.0})
    res = results([a, b])
    header, rows = length_table(res)
    assert header == ["scheme", "16", "64 (extrap.)", "256 (extrap.)"]
    assert rows == [["alibi", f"2.500 ± {math.sqrt(0.5):.3f}", f"3.000 ± {math.sqrt(2.0):.3f}", "n/a"]]
    _, rows_b = pattern_table(res)
    assert rows_b[1] == ["alibi", "window:16", f"1.250 ± {math.sqrt(0.125):.3f}", f"1.500 ± {math.sqrt(0.5):.3f}"]
    p = principles(res)[0]
    assert p["ratio_4x"] == 3.0 / 2.5 and p["ratio_16x"] is None and p["best_pattern_16x"] == "window:16"
    assert "mean ± std over seeds" in markdown(res)


def test_absolute_schemes_are_left_out_of_pattern_table():
    res = results([run("sinusoidal", 0, {("causal", 64): 5.0}, relative=False), run("rope", 0, {("causal", 64): 3.0})])
    _, rows = pattern_table(res)
    assert {r[0] for r in rows} == {"rope"}
