"""benchmarks/ on the library's own pieces (issue 68 item 5): every benchmark module imports, the FLOPs
count is :func:`lexkit.core.provenance.flops_per_token`, one builder per library, tables drawn by
:mod:`lexkit.documents.render` (a stored report re-renders to its table), sweep documents read as typed
rows. Closed forms only: nothing here measures."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = ("common", "builders", "contenders", "training", "render", "long_eval", "run", "gpu", "recipe_step",
           "compile", "batched", "entmax", "stream", "stream_layouts", "threads", "retrieval_mix", "layouts",
           "hunt2_pooled", "hunt2_seeds", "hunt2_mass_table", "probe_curve")


#: benchmark modules whose names are also installed packages': loaded under another name, so the package
#: (``entmax``, which tests/test_entmax.py compares with) is never shadowed in this process
SHADOWING = ("entmax",)


@pytest.fixture(scope="module")
def bench():
    """The benchmark modules by name, imported as their scripts import each other (benchmarks/ on the
    path only while they import; their lazy imports of each other read sys.modules), and forgotten
    afterwards (their names are generic: common, training, render ...)."""
    before, path = set(sys.modules), list(sys.path)
    out = {}
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        for name in MODULES:
            if name in SHADOWING:
                spec = importlib.util.spec_from_file_location(f"benchmark_{name}", ROOT / "benchmarks" / f"{name}.py")
                out[name] = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(out[name])
            else:
                out[name] = importlib.import_module(name)
    finally:
        sys.path[:] = path  # as it was (stream_layouts.py puts benchmarks/ on it as it imports)
    try:
        yield out
    finally:
        for name in set(sys.modules) - before:
            if name in MODULES:
                del sys.modules[name]


def test_training_flops_are_provenance_formula(bench):
    """The explicit count's FLOPs per byte: 6N + 12·L·d·T with N the linear weights (12·L·d² + d·V),
    the forward a third of it; and N is what lexkit's tiny model holds in nn.Linear."""
    from lexkit.model.gpt import VOCAB

    n_layers, d, ctx = 2, 32, 32
    linear = 12 * n_layers * d * d + d * VOCAB
    flops = bench["training"].train_flops_per_byte(n_layers, d, VOCAB, ctx)
    assert flops == {"linear_weights": linear, "forward": 2 * linear + 4 * n_layers * d * ctx,
                     "train": 6 * linear + 12 * n_layers * d * ctx}
    model, _ = bench["builders"].lexkit_model("tiny", "rope")
    assert (model.cfg.n_layers, model.cfg.d_model, model.cfg.train_len) == (n_layers, d, ctx)
    assert bench["training"].linear_weights(model) == linear


def test_markdown_table_is_the_library_one(bench):
    assert bench["common"].md_table(["a", "b"], [[1, "x"], [2.5, "y|z"]]) == (
        "| a | b |\n| --- | --- |\n| 1 | x |\n| 2.5 | y\\|z |")


def separators(text: str) -> str:
    """Markdown with every table's separator row written one way (``|---|``, ``| --- |``, ``|---:|``)."""
    return re.sub(r"(?m)^\|(?:\s*:?-+:?\s*\|)+$", lambda m: "|" + "---|" * (m.group(0).count("|") - 1), text)


@pytest.mark.parametrize("name", ["batched", "entmax"])
def test_a_stored_report_renders_to_its_table(bench, name):
    """docs/benchmarks-NAME.md re-rendered from its JSON: the same text (the separator rows aside, written
    by the writer the script had before)."""
    data = json.loads((ROOT / "docs" / f"benchmarks-{name}.json").read_text())
    facts = data["machine"] if name == "batched" else data["facts"]
    text = bench[name].render(data["rows"], facts)
    assert separators(text) == separators((ROOT / "docs" / f"benchmarks-{name}.md").read_text())


def test_sweep_document_reads_as_typed_rows(bench):
    """The safety net's sweep.json through common.read_sweep: table G's section and the tasks' entries
    as rows; the hunt's scripts count its documents (needles per depth x depths) and pool its seeds."""
    from lexkit.study.tables.retrieval.rows import RetrievalEntry, RetrievalSection

    doc = bench["common"].read_sweep(ROOT / "tests" / "fixtures" / "safety_net" / "sweep.json")
    assert isinstance(doc.section, RetrievalSection) and all(isinstance(e, RetrievalEntry) for e in doc.section.configs)
    figures, near = defaultdict(dict), defaultdict(dict)
    assert bench["hunt2_seeds"].from_sweep(doc, figures, near) == doc.section.samples * len(doc.section.depths)
    pooled = bench["hunt2_pooled"].pooled(doc)
    labels = {e.label for e in doc.section.configs}
    assert {arm for arm, _ in pooled} == labels and {part for _, part in pooled} >= set(doc.tasks)
    assert sorted(figures) == sorted(labels)
    assert bench["hunt2_pooled"].lines(doc)[0].split("  ")[0] == "part"


@pytest.mark.slow
def test_x_transformers_matched_to_lexkit(bench):
    """x-transformers built to lexkit's network holds lexkit's parameters less the LayerNorm biases it
    lacks, (2L + 1)·d (render.CONFIG_NOTES), for each scheme it has; rotary over the whole head. Slow:
    importing x-transformers alone takes 2 s here (the fast sibling: the lexkit builder's closed forms)."""
    pytest.importorskip("x_transformers")
    builders = bench["builders"]
    for scheme in builders.XT_SCHEMES:
        model, _ = builders.lexkit_model("tiny", scheme)
        cfg = model.cfg
        xt = builders.xt_model(cfg)
        assert builders.count_params(model) - builders.count_params(xt) == (2 * cfg.n_layers + 1) * cfg.d_model
    rotary = builders.xt_model(builders.lexkit_model("tiny", "rope")[0].cfg).attn_layers.rotary_pos_emb
    assert rotary.inv_freq.numel() * 2 == cfg.head_dim


def test_the_seeds_by_depth_are_the_cells_at_16x(bench):
    """hunt2_seeds --by-depth: each arm's exact match at 16x per part and depth is its entries' cells there,
    per seed, in the order the sweep scored them (the safety net's sweep: two arms, seeds 1 and 2)."""
    doc = bench["common"].read_sweep(ROOT / "tests" / "fixtures" / "safety_net" / "sweep.json")
    depths = bench["hunt2_seeds"].by_depth(doc)
    far = 16 * doc.section.train_len
    for entry in doc.section.configs:
        cells = {c.depth: 100 * c.accuracy for c in entry.cells if c.length == far and c.pattern == entry.pattern}
        assert {d: v[entry.seed] for d, v in depths[entry.label][entry.format].items()} == cells
    table = bench["hunt2_seeds"].depth_table(doc, "a3").splitlines()
    assert table[0] == "| arm | part | " + " | ".join(f"{d:g} %" for d in doc.section.depths) + " |"
    assert table[2].startswith("| a3 |")  # the base arm first


def test_the_seeds_by_multiple_are_the_rows_at_each_multiple(bench):
    """hunt2_seeds --multiples: each arm's exact match per part at each multiple is its entries' rows there, per
    seed; the pooled figure is their mean over the seeds (the safety net's sweep: two arms, seeds 1 and 2)."""
    doc = bench["common"].read_sweep(ROOT / "tests" / "fixtures" / "safety_net" / "sweep.json")
    table, n = bench["hunt2_seeds"].by_multiple([doc], [1, 16])
    assert n == doc.section.samples * len(doc.section.depths)
    for entry in doc.section.configs:
        rows = {r.multiple: 100 * r.accuracy for r in entry.rows if r.multiple in (1, 16)}
        assert {m: v[entry.seed] for m, v in table[entry.label][entry.format].items()} == rows
    text = bench["hunt2_seeds"].multiples_table([doc], [1, 16], ["tilde"], "a3").splitlines()
    assert text[0] == "| arm | part | 1x | 16x |" and text[2].startswith("| a3 | tilde |")  # the base arm first
    seeds = table["a3"]["tilde"][1]
    mean = sum(seeds.values()) / len(seeds)
    assert text[2].split(" | ")[2].startswith("/".join(f"{seeds[s]:.0f}" for s in sorted(seeds)) + f": {mean:.0f}")


def test_the_probe_curve_is_read_as_round_3_reads_it(bench, tmp_path, capsys):
    """probe_curve: the first validation at 50 %, three in a row at 90 % (the stop rule's own function), the best
    (its first step on a tie), the mean of each window and the last five, from the validation rows alone."""
    pc, task = bench["probe_curve"], "kvthread:supervise=every"
    exact = [0.1, 0.3, 0.55, 0.4, 0.9, 0.95, 0.8, 0.9, 0.92, 0.95, 0.95]  # steps 0, 100, ..., 1000
    rows = []
    for i, x in enumerate(exact):
        rows.append({"step": 100 * i, "loss": 1.0})  # a training row: no probe
        rows.append({"step": 100 * i, "val_bpb": 2.0, f"val_{task}_exact": x})
    got = pc.read(rows, task, window=400)
    assert got["first_50"] == 200 and got["converged"] == 900  # 0.9, 0.92, 0.95 at 700-900; 400-500 broken at 600
    assert got["best"] == 0.95 and got["best_step"] == 500 and got["last_step"] == 1000
    # windows of 400 steps: 0-400 holds steps 0..400, then 500-800, then 900-1000
    assert got["windows"] == pytest.approx([sum(exact[:5]) / 5, sum(exact[5:9]) / 4, sum(exact[9:]) / 2])
    assert got["last_five"] == exact[-5:]
    with pytest.raises(ValueError, match="val_ordinal_exact"):
        pc.read(rows, "ordinal", window=400)

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert pc.main([f"arm a={run}", "--task", task, "--window", "400"]) == 0
    line = capsys.readouterr().out.splitlines()[2]
    assert line == "| arm a | 200 | 900 | 95 % (500) | 1,000 | 45 / 89 / 95 | 80, 90, 92, 95, 95 |"
    assert pc.main([str(tmp_path / "none"), "--task", task]) == 2
    assert f"error: no metrics.jsonl in {str(tmp_path / 'none')!r}" in capsys.readouterr().err
