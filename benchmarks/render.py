"""What the numbers mean: the targets (PASS/MISS) and the markdown report (blocks of
:mod:`lexkit.documents.blocks`, drawn by :func:`lexkit.documents.render.markdown`)."""

from __future__ import annotations

from pathlib import Path

from common import table
from contenders import BATCH, D_MODEL, N_HEADS, N_LAYERS, PATTERNS, TRAIN, TRAIN_LEN, WINDOW, Settings
from lexkit.documents.blocks import Heading, Table, Text
from lexkit.documents.render import markdown
from lexkit.model.gpt import VOCAB

ANALYSIS = Path(__file__).with_name("analysis.md")  # the profile behind the numbers, kept by hand


def targets(training: dict, evals: list[dict], settings: Settings) -> list[dict]:
    """The targets, each measured and judged: training bytes/s at least 1.5x x-transformers'
    (matched configuration); under each pattern, bytes/s at the longest length at least 0.8x
    that at the shortest, and peak memory at the longest at most 1.5 GB."""
    out = []
    for scheme, row in training.items():
        ratio = row["ratio_lexkit_over"]["x-transformers"]
        out.append({"target": f"training {scheme}: lexkit >= 1.5x x-transformers bytes/s",
                    "measured": f"{ratio:.2f}x", "pass": ratio >= 1.5})
    find = {(e["scheme"], e["pattern"], e["n"]): e for e in evals if e["lib"] == "lexkit" and e["kernel"] == "auto"}
    small, big = min(settings.lengths), max(settings.lengths)
    for scheme, pattern, _ in sorted(k for k in find if k[2] == big):
        lo, hi = find.get((scheme, pattern, small)), find[(scheme, pattern, big)]
        if lo is None or "error" in lo or "error" in hi:
            out.append({"target": f"eval {scheme} {pattern}: ran at {small:,} and {big:,}", "measured": "error",
                        "pass": False})
            continue
        ratio = hi["bytes_per_s"] / lo["bytes_per_s"]
        out.append({"target": f"eval {scheme} {pattern}: bytes/s at {big:,} >= 0.8x bytes/s at {small:,}",
                    "measured": f"{ratio:.2f}x", "pass": ratio >= 0.8})
        out.append({"target": f"eval {scheme} {pattern}: peak memory at {big:,} <= 1.5 GB",
                    "measured": f"{hi['peak_mb'] / 1024:.2f} GB", "pass": hi["peak_mb"] <= 1.5 * 1024})
    return out


CONFIG_NOTES = """\
- Both sides: {layers} layers, d_model {d}, {heads} heads of {hd}, MLP 4x with GELU, pre-LN, final LN,
  tied input/output embedding over {vocab} tokens, no absolute position table; training length
  {n}, batch {batch}; one training step for both, `lexkit.training.loop.train_step` (the step `lexkit
  train` runs: float32 cross-entropy, `loss.item()`, backward, gradient clipping {clip}, AdamW),
  with the optimizer of `lexkit.training.loop.make_optimizer` (fused AdamW, lr {lr}, betas 0.9/0.95,
  weight decay {wd} on matrices); random bytes, the same batches for both.
  `torch.set_num_threads({threads})` for both.
- x-transformers: `TransformerWrapper(num_tokens={vocab}, max_seq_len={n}, use_abs_pos_emb=False,
  tie_embedding=True, attn_layers=Decoder(dim={d}, depth={layers}, heads={heads}, attn_dim_head={hd},
  ff_no_bias=True, <scheme flag>))`, scheme flag `alibi_pos_bias=True`,
  `rotary_pos_emb=True, rotary_emb_dim={hd}` or `rotary_xpos=True, rotary_emb_dim={hd}`.
  Its defaults differ: 64-dim heads ({default_params} parameters),
  biased MLP, an absolute position table even with ALiBi, rotary on half of each head.
- Remaining differences: x-transformers projects q, k, v with three matrices (lexkit one fused
  matrix), its LayerNorm has no bias ({ln_params:,} fewer parameters), its rotary pairs are interleaved
  (lexkit rotate-half) and its xPos decay is centred at n/2; "x-transformers" attends with its
  own einsum/softmax path (the default), "x-transformers flash" with `attn_flash=True` (SDPA).
  "x-transformers defaults" is its README configuration at the same dim/depth/heads (not the
  same size; shown for reference). The training targets compare with "x-transformers".
- Evaluation: one sequence of n random bytes, untrained weights (cost does not depend on them),
  lexkit through `lexkit.evaluate.evaluate` (forward + float64 NLL), x-transformers through the
  same forward + float64 NLL with `attn_max_attend_past={past}` (it keeps distance <= {past}: the same
  keys as lexkit's `{window}`), an O(n²) dense mask, so only at the lengths that fit.
  Each measurement runs in a fresh process capped at {guard} GB of address space; "first" is the
  first evaluation (for flex: block mask + compilation), "steady" the median of the rest. Peak
  is the child's peak RSS (VmHWM), the worst repetition; "above base" subtracts the RSS after
  imports and model build. Times and bytes/s are medians over repetitions.
"""


def config_notes(result: dict) -> str:
    """CONFIG_NOTES filled in from the configuration the contenders were built with."""
    default_params = ", ".join(f"{s} {r['xt_default_params']:,}" for s, r in result["training"].items())
    return CONFIG_NOTES.format(
        layers=N_LAYERS, d=D_MODEL, heads=N_HEADS, hd=D_MODEL // N_HEADS, vocab=VOCAB, n=TRAIN_LEN,
        batch=BATCH, clip=TRAIN.grad_clip, lr=TRAIN.lr, wd=TRAIN.weight_decay, threads=result["machine"]["threads"],
        default_params=default_params, ln_params=(2 * N_LAYERS + 1) * D_MODEL, past=WINDOW - 1, window=PATTERNS[0],
        guard=result["mem_guard_gb"])


def training_table(training: dict, flops: dict, gflops: float) -> Table:
    names = list(next(iter(training.values()))["median_bytes_per_s"])
    headers = ["scheme"] + [f"{n} B/s" for n in names] + [f"lexkit / {n}" for n in names[1:]]
    headers += ["parameters", "ATen ops per step", "lexkit % of matmul rate"]
    rows = []
    for scheme, row in training.items():
        rates = row["median_bytes_per_s"]
        achieved = rates["lexkit"] * flops["train"] / 1e9
        rows.append([scheme] + [f"{rates[n]:,.0f}" for n in names]
                    + [f"**{row['ratio_lexkit_over'][n]:.2f}x**" for n in names[1:]]
                    + [" / ".join(f"{row['params'][n]:,}" for n in names),
                       " / ".join(f"{row['ops_per_step'][n]:,}" for n in names),
                       f"{100 * achieved / gflops:.1f}% ({achieved:.1f} GFLOP/s)"])
    return table(headers, rows)


def eval_table(evals: list[dict]) -> Table:
    headers = ["library", "scheme", "pattern", "kernel", "n", "first s", "steady s", "bytes/s", "peak MB",
               "above base MB"]
    rows = []
    for e in evals:
        head = [e["lib"], e["scheme"], e["pattern"], e["kernel"], f"{e['n']:,}"]
        if "error" in e:
            rows.append(head + ["—", "—", e["error"], f"{e['peak_mb']:,.0f}", "—"])
        else:
            rows.append(head + [f"{e['first_s']:.2f}", f"{e['steady_s']:.2f}", f"{e['bytes_per_s']:,.0f}",
                                f"{e['peak_mb']:,.0f}", f"{e['peak_mb'] - e['baseline_mb']:,.0f}"])
    return table(headers, rows)


def eval_ratio_table(evals: list[dict]) -> Table | Text:
    """lexkit auto against x-transformers local at the same n (window), where both ran."""
    xt = {e["n"]: e for e in evals if e["lib"] == "x-transformers" and "error" not in e}
    rows = []
    for e in evals:
        if e["lib"] == "lexkit" and e["kernel"] == "auto" and e["scheme"] == "alibi" and e["pattern"] == PATTERNS[0] \
                and e["n"] in xt and "error" not in e:
            other = xt[e["n"]]
            rows.append([f"{e['n']:,}", f"{other['steady_s'] / e['steady_s']:.1f}x",
                         f"{other['peak_mb'] / e['peak_mb']:.1f}x"])
    if not rows:
        return Text("_(no length where both ran)_")
    return table(["n", "x-transformers time / lexkit time", "x-transformers peak / lexkit peak"], rows)


def load_note(machine: dict) -> str:
    """A warning when other work shared the cores ("" when none did): every multi-threaded operator then
    waits at its barrier for a descheduled thread, which penalises many small operators most."""
    own = machine["threads"]  # this benchmark's own threads count in the load at the end
    load = max(machine["load_average_start"][0], machine.get("load_average_end", [0])[0] - own)
    if load < 0.5 * machine["cores"]:
        return ""
    return ("**The machine was shared** (other work: a 1-minute load average up to "
            f"{load:.1f} on {machine['cores']} cores): "
            "absolute numbers are low and noisy, and code that dispatches many small operators is "
            "penalised more than its share. The interleaved ratios are the numbers to read.")


def render(result: dict) -> str:
    m, flops = result["machine"], result["flops_per_byte"]
    facts = table(["fact", "value"], [[k.replace("_", " "), v] for k, v in m.items()])
    t = result["targets"]
    target_rows = [[x["target"], x["measured"], "PASS" if x["pass"] else "**MISS**"] for x in t]
    gflops = result["matmul_gflops"]
    note = load_note(m)
    analysis = ANALYSIS.read_text().strip() if ANALYSIS.is_file() else ""
    return markdown([
        Heading("Benchmarks: lexkit and x-transformers side by side", 1),
        Text(f"Written by `python benchmarks/run.py{' --quick' if result['quick'] else ''}` "
             f"({result['elapsed_s'] / 60:.1f} min). Both libraries ran in the same process (training) or in "
             "alternating child processes (evaluation), interleaved, so the ratios hold better than the "
             "absolute numbers on a shared machine."),
        Heading("Machine"), facts, *([Text(note)] if note else []),
        Heading("Targets"), table(["target", "measured", "result"], target_rows),
        Heading("Training (small preset, bytes/s, median of alternating repetitions)"),
        training_table(result["training"], flops, gflops),
        Text(f"Ratios are medians of per-repetition ratios. FLOPs per byte (one training step, "
             f"explicit count): {flops['train'] / 1e6:.2f} MFLOP ({flops['linear_weights']:,} linear weights, "
             f"lexkit's nn.Linear count {result['lexkit_linear_weights']:,}; attention at length {TRAIN_LEN}). "
             f"Measured float32 matmul rate (1024³, {m['threads']} threads, median over the rotation): "
             f"{gflops:.1f} GFLOP/s."),
        Heading("Long evaluation (one sequence, small model)"), eval_table(result["eval"]),
        Heading("lexkit (alibi, window, auto kernel) against x-transformers' local mask", 3),
        eval_ratio_table(result["eval"]),
        *([Text(analysis)] if analysis else []),
        Heading("How the configurations match"), Text(config_notes(result)),
    ])
