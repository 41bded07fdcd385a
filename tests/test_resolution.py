"""Attention resolution: the formula, the analytic curves, the empirical instrument and the CLI."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kit import tiny_gpt
from lexkit import GPT, positions
from lexkit import resolution as res
from lexkit.attention import create as create_pattern
from lexkit.attention import kernels
from lexkit.cli import main
from lexkit.core.specs import parse_lengths

RELATIVE = [name for name in positions.names() if positions.get(name).relative]


# -- R on closed forms --------------------------------------------------------------------------
@pytest.mark.parametrize("a", [0.05, 0.5, 3.0])
@pytest.mark.parametrize("n", [1, 2, 9, 300])
def test_linear_curve_matches_geometric_closed_form(a, n):
    # s_i = -a i, e_i = r^i: numerator = (1-r) sum_{i<n-1} r^{2i} + r^{2(n-1)}, denominator (sum r^i)^2
    r = math.exp(-a)
    numerator = (1 - r) * (1 - r ** (2 * (n - 1))) / (1 - r * r) + r ** (2 * (n - 1))
    denominator = ((1 - r**n) / (1 - r)) ** 2
    s = -a * torch.arange(n, dtype=torch.float64)
    assert float(res.resolution(s)) == pytest.approx(numerator / denominator, rel=1e-12)


@pytest.mark.parametrize("n", [1, 5, 1024])
def test_constant_curve_is_one_over_n_squared(n):
    # every term but the last is e(e - e) = 0; the last is e^2 against (n e)^2
    for c in (0.0, -7.5, 800.0):  # 800 would overflow exp without the max shift
        assert float(res.resolution(torch.full((n,), c))) == pytest.approx(1 / n**2, rel=1e-12)


@pytest.mark.parametrize("where", [0, 3, 9])
def test_single_spike_is_one(where):
    s = torch.full((10,), -math.inf)
    s[where] = 2.0
    assert float(res.resolution(s)) == 1.0
    finite = torch.zeros(10)
    finite[where] = 60.0  # the other nine weigh e^-60 against it
    assert float(res.resolution(finite)) == pytest.approx(1.0, abs=1e-20)


def test_masked_distances_count_zero():
    # e = [1, 0, 1]: (1·1 + 0 + 1·1) / 2^2
    assert float(res.resolution(torch.tensor([0.0, -math.inf, 0.0]))) == pytest.approx(0.5)
    assert res.resolution(torch.zeros(3, 4)).shape == (3,)
    assert math.isnan(float(res.resolution(torch.full((4,), -math.inf))))


@settings(max_examples=60, deadline=None, derandomize=True)  # the same 60 examples each run (test_fuzz's rule)
@given(
    st.lists(st.one_of(st.floats(-60, 60), st.just(-math.inf)), min_size=1, max_size=64).filter(
        lambda xs: any(math.isfinite(x) for x in xs)
    ),
    st.floats(-500, 500),
)
def test_resolution_is_between_zero_and_one_and_shift_invariant(values, shift):
    s = torch.tensor(values, dtype=torch.float64)
    r = float(res.resolution(s))
    assert 0.0 < r <= 1.0 + 1e-12
    assert float(res.resolution(s + shift)) == pytest.approx(r, rel=1e-9)


def test_parse_lengths():
    assert parse_lengths("1024,2048") == [1024, 2048]
    assert parse_lengths(" 8 , 16 ") == [8, 16]
    assert parse_lengths("8,8") == [8]  # the one rule of every --lengths: sorted, duplicates dropped
    for bad, words in [("", "comma list"), ("1024,", "comma list"), ("ab", "not an integer"),
                       ("0", "not a positive"), ("-4", "not a positive")]:
        with pytest.raises(ValueError, match=words):
            parse_lengths(bad)


# -- analytic curves ----------------------------------------------------------------------------
def rotary_formula(n_max: int, h: int, zeta: torch.Tensor, scale_base: float = 512.0) -> torch.Tensor:
    """(2/sqrt(h)) sum_i zeta_i^(n/B) cos(n theta_i), theta_i = 10000^(-2i/h).

    The constant: with rotate-half pairing, pair i of the all-ones vector is (x_i, x_{i+h/2}) = (1, 1).
    Rotating the query's pair by a and the key's by b gives (cos a - sin a, sin a + cos a) and the
    same with b; their dot product is 2 cos a cos b + 2 sin a sin b = 2 cos(a - b). Summed over the
    h/2 pairs and divided by sqrt(h) (the scores' scale), with xPos's factor zeta_i^((m - n)/B).
    """
    n = torch.arange(n_max, dtype=torch.float64)[:, None]
    i = torch.arange(h // 2, dtype=torch.float64)
    theta = 10000.0 ** (-2 * i / h)
    return (2 / math.sqrt(h)) * (zeta ** (n / scale_base) * torch.cos(n * theta)).sum(-1)


@pytest.mark.parametrize("h", [16, 64])
def test_rope_curve_is_the_cosine_sum(h):
    curve = res.analytic_curve("rope", 3000, heads=3, head_dim=h)
    expected = rotary_formula(3000, h, torch.ones(h // 2, dtype=torch.float64))
    assert curve.shape == (3, 3000)
    torch.testing.assert_close(curve, expected.expand(3, -1), rtol=1e-9, atol=1e-9)
    assert float(curve[0, 0]) == pytest.approx(math.sqrt(h))


@pytest.mark.parametrize("h", [16, 64])
def test_xpos_curve_is_the_decayed_cosine_sum(h):
    i = torch.arange(h // 2, dtype=torch.float64)
    zeta = (2 * i + 0.4 * h) / (1.4 * h)
    curve = res.analytic_curve("xpos", 3000, heads=2, head_dim=h)
    torch.testing.assert_close(curve, rotary_formula(3000, h, zeta).expand(2, -1), rtol=1e-9, atol=1e-9)
    # xPos without decay is RoPE exactly
    torch.testing.assert_close(res.analytic_curve("xpos:decay=false", 500, heads=2, head_dim=h),
                               res.analytic_curve("rope", 500, heads=2, head_dim=h))


@pytest.mark.parametrize("heads", [8, 16])
def test_alibi_curve_is_minus_slope_times_distance(heads):
    curve = res.analytic_curve("alibi", 700, heads=heads, head_dim=64)
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / heads) for h in range(heads)], dtype=torch.float64)
    n = torch.arange(700, dtype=torch.float64)
    # the all-ones content score sqrt(64) = 8 is the same constant at every distance
    torch.testing.assert_close(curve - 8.0, -slopes[:, None] * n, rtol=1e-6, atol=1e-4)


def test_bias_curves_come_from_the_schemes_bias():
    for spec in ("kerple-log", "kerple-power", "sandwich", "t5"):
        scheme = res.make_scheme(spec, heads=4, head_dim=32, seed=3)
        expected = scheme.bias_table(400).detach().double() + math.sqrt(32)
        torch.testing.assert_close(res.analytic_curve(spec, 400, heads=4, head_dim=32, seed=3), expected)
        torch.testing.assert_close(res.analytic_curve(scheme, 400), expected)


def test_seed_fixes_learnable_values_and_leaves_the_global_rng_alone():
    state = torch.get_rng_state()
    a = res.analytic_curve("kerple-log", 100, heads=4, head_dim=16, seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a, res.analytic_curve("kerple-log", 100, heads=4, head_dim=16, seed=1))
    assert not torch.equal(a, res.analytic_curve("kerple-log", 100, heads=4, head_dim=16, seed=2))


def test_nope_is_flat():
    curve = res.analytic_curve("none", 50, heads=2, head_dim=16)
    torch.testing.assert_close(curve, torch.full((2, 50), 4.0, dtype=torch.float64))
    assert float(res.resolution(curve).mean()) == pytest.approx(1 / 50**2)


@pytest.mark.parametrize("name", RELATIVE)
@pytest.mark.parametrize("kind", ["window", "bca"])
def test_window_invariance(name, kind):
    """A relative scheme under window:W (or bca:W) at any N >= W has the analytic R of causal at W."""
    w = 64
    causal = res.resolution(res.analytic_curve(name, w, heads=4, head_dim=32, seed=5))
    for n in (w, w + 1, 3 * w + 5):
        curve = res.analytic_curve(name, n, f"{kind}:{w}", heads=4, head_dim=32, seed=5)
        assert torch.isinf(curve[:, w:]).all() and torch.isfinite(curve[:, :w]).all()
        torch.testing.assert_close(res.resolution(curve), causal, rtol=1e-9, atol=1e-12)


def test_sinusoidal_curve_is_the_mean_table_product():
    # for Vaswani's table p_m . p_(m-n) = sum_i cos(n w_i) at every m, so the mean is that sum
    d, n = 4 * 16, 300
    curve = res.analytic_curve("sinusoidal", n, heads=4, head_dim=16)
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    expected = torch.cos(torch.arange(n, dtype=torch.float64)[:, None] * omega).sum(-1) / math.sqrt(d)
    torch.testing.assert_close(curve, expected.expand(4, -1), rtol=0, atol=1e-5)


@pytest.mark.parametrize("pattern", ["causal", "window:40", "bca:40"])
def test_learned_curve_is_the_mean_over_visible_pairs(pattern):
    n = 300  # more than one accumulation block
    scheme = res.make_scheme("learned:max_len=512", heads=2, head_dim=8, seed=0)
    p = scheme.table.detach().double()[:n]  # [n, 16]
    dots = p @ p.T / 4.0  # / sqrt(d_model = 16)
    idx = torch.arange(n)
    vis = create_pattern(pattern).visible(idx[:, None], idx[None, :])
    expected = torch.full((n,), -math.inf, dtype=torch.float64)
    for d in range(n):
        diag, seen = torch.diagonal(dots, -d), torch.diagonal(vis, -d)
        if seen.any():
            expected[d] = diag[seen].mean()
    torch.testing.assert_close(res.analytic_curve(scheme, n, pattern), expected.expand(2, -1))


def test_learned_past_its_table_is_reported_not_fatal():
    with pytest.raises(ValueError, match="past the table"):
        res.analytic_curve("learned:max_len=64", 65, heads=2, head_dim=8)
    doc = res.analytic("learned:max_len=64", [64, 128], heads=2, head_dim=8)
    assert doc["results"][0]["resolution"] is not None
    assert doc["results"][1]["resolution"] is None and "past the table" in doc["results"][1]["note"]


@pytest.mark.parametrize("pattern", ["window:7", "window:50", "bca:8", "bca:64"])
def test_visible_counts(pattern):
    n = 90
    idx = torch.arange(n)
    vis = create_pattern(pattern).visible(idx[:, None], idx[None, :])
    expected = torch.stack([torch.diagonal(vis, -d).sum() for d in range(n)])
    assert torch.equal(res.visible_counts(pattern, n, block=16), expected)
    assert torch.equal(res.visible_counts("causal", n), n - idx)


def test_analytic_document_schema():
    doc = res.analytic("alibi", "64,128", "bca:64", heads=4, head_dim=16)
    assert doc["report"] == "lexkit.resolution" and doc["report_version"] == 3 and doc["source"] == "analytic"
    assert doc["scheme"] == "alibi"
    assert [r["length"] for r in doc["results"]] == [64, 128]
    for row in doc["results"]:
        assert row["pattern"] == "bca:64" and len(row["per_head"]) == 4
        assert row["resolution"] == pytest.approx(sum(row["per_head"]) / 4)
        assert row["per_layer"] is None and row["entropy"] is None
    json.dumps(doc)
    with pytest.raises(ValueError, match="needs its W"):
        res.analytic("alibi", [64], "window")


# -- empirical ----------------------------------------------------------------------------------
def tiny(scheme: str, train_len: int = 64) -> GPT:
    return tiny_gpt(scheme, train_len=train_len)


def zero_qk(model: GPT) -> GPT:
    d = model.cfg.d_model
    with torch.no_grad():
        for block in model.blocks:
            block.qkv.weight[: 2 * d] = 0.0  # q and k rows: content scores are exactly 0
    return model


@pytest.mark.parametrize("scheme", ["alibi", "kerple-log"])
@pytest.mark.parametrize("pattern", ["causal", "window:50", "bca:64"])
def test_empirical_curve_with_zero_content_is_the_bias(scheme, pattern, monkeypatch):
    monkeypatch.setattr(kernels.step, "CHUNK", 64)  # query blocks of 64, not 256: several in n = 150
    model = zero_qk(tiny(scheme))
    n = 150  # past bca:64's reach of 128 keys
    tokens = torch.randint(0, 256, (3, n))
    out = res.empirical(model, tokens, pattern, batch_size=2)
    bias = model.scheme.bias_table(n).detach().double()  # [H, n]
    seen = res.visible_counts(pattern, n) > 0
    expected = bias.masked_fill(~seen, -math.inf)
    for layer in range(model.cfg.n_layers):
        torch.testing.assert_close(out["curve"][layer], expected, rtol=1e-12, atol=0)
    assert torch.equal(out["count"], 3.0 * res.visible_counts(pattern, n).double())
    assert out["resolution"] == pytest.approx(float(res.resolution(expected).mean()), rel=1e-9)


def test_entropy_of_uniform_attention_is_log_count():
    model = zero_qk(tiny("none"))
    n = 280
    i = torch.arange(n, dtype=torch.float64)
    for pattern, count in [("causal", i + 1), ("window:30", (i + 1).clamp(max=30))]:
        out = res.empirical(model, torch.randint(0, 256, (2, n)), pattern)
        expected = float(torch.log(count).mean())
        assert out["entropy"] == pytest.approx(expected, rel=1e-6)  # probs are float32
        assert out["entropy_per_layer"] == pytest.approx([expected] * 2, rel=1e-6)


def dense_reference(model: GPT, tokens: torch.Tensor, pattern: str):
    """s_hat [L, H, n] and entropy [L, H] from the full n x n scores of each layer, computed with the
    scheme's `scores` on the q, k that layer's projection produced."""
    captured = []
    hooks = [b.qkv.register_forward_hook(lambda mod, inp, out: captured.append(out)) for b in model.blocks]
    with torch.no_grad():
        model(tokens, pattern=pattern)
    for h in hooks:
        h.remove()
    b, n = tokens.shape
    heads, hd = model.cfg.n_heads, model.cfg.head_dim
    pos = torch.arange(n)
    vis = model.pattern(pattern).visible(pos[:, None], pos[None, :])
    curves, entropies = [], []
    for out in captured:
        q, k, _ = out.view(b, n, 3, heads, hd).permute(2, 0, 3, 1, 4)
        with torch.no_grad():
            scores = model.scheme.scores(q, k, pos, pos).double().masked_fill(~vis, -math.inf)  # [b, H, n, n]
        curve = torch.full((heads, n), -math.inf, dtype=torch.float64)
        for d in range(n):
            diag, seen = torch.diagonal(scores, -d, dim1=-2, dim2=-1), torch.diagonal(vis, -d)
            if seen.any():
                curve[:, d] = diag[..., seen].mean(dim=(0, 2))
        p = torch.softmax(scores, -1)
        entropies.append(-torch.special.xlogy(p, p).sum(-1).mean(dim=(0, 2)))
        curves.append(curve)
    return torch.stack(curves), torch.stack(entropies)


@pytest.mark.parametrize(
    "scheme,pattern", [("xpos", "causal"), ("alibi", "bca:64"), ("rope", "window:40"), ("sinusoidal", "causal")]
)
def test_blockwise_accumulation_equals_dense(scheme, pattern, monkeypatch):
    monkeypatch.setattr(kernels.step, "CHUNK", 64)  # query blocks of 64, not 256: the same blocks, smaller
    model = tiny(scheme)
    with torch.no_grad():  # larger weights: scores far from uniform
        for block in model.blocks:
            block.qkv.weight.mul_(10)
    n = kernels.step.CHUNK + 45  # two query blocks
    tokens = torch.randint(0, 256, (2, n))
    out = res.empirical(model, tokens, pattern)
    curve, entropy = dense_reference(model, tokens, pattern)
    torch.testing.assert_close(out["curve"], curve, rtol=1e-5, atol=1e-5)
    f64 = torch.float64
    torch.testing.assert_close(torch.tensor(out["entropy_per_head"], dtype=f64), entropy, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.tensor(out["per_head"], dtype=f64), res.resolution(curve), rtol=1e-5, atol=1e-7)
    assert out["pattern"] == model.pattern(pattern).spec and out["texts"] == 2


def test_empirical_at_eight_times_the_training_length():
    model = tiny("alibi", train_len=64)
    out = res.empirical(model, torch.randint(0, 256, (1, 8 * 64)), "causal")
    assert out["length"] == 512 and len(out["per_layer"]) == 2
    assert 0 < out["resolution"] <= 1 and torch.isfinite(out["curve"]).all()
    json.dumps(res.to_json(out))


# -- CLI ----------------------------------------------------------------------------------------
def test_cli_analytic_writes_json_and_png(tmp_path, capsys):
    js, png = tmp_path / "r.json", tmp_path / "r.png"
    argv = ["resolution", "--scheme", "rope", "--scheme", "alibi", "--heads", "4", "--head-dim", "16",
            "--lengths", "64,128", "--pattern", "window:64", "--json", str(js), "--plot", str(png)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[1].split() == ["scheme", "64", "128"]
    assert lines[2].split()[0] == "rope" and lines[3].split()[0] == "alibi"
    doc = json.loads(js.read_text())
    assert {"report", "report_version", "lexkit_version", "source", "scheme", "results"} <= set(doc)
    assert doc["source"] == "analytic" and doc["scheme"] == ["rope", "alibi"]
    pairs = [(r["scheme"], r["length"]) for r in doc["results"]]
    assert pairs == [("rope", 64), ("rope", 128), ("alibi", 64), ("alibi", 128)]
    for r in doc["results"]:
        assert {"length", "pattern", "resolution", "per_head", "per_layer", "entropy"} <= set(r)
        assert r["pattern"] == "window:64" and len(r["per_head"]) == 4 and 0 < r["resolution"] <= 1
    lib = res.analytic("alibi", [128], "window:64", heads=4, head_dim=16)["results"][0]["resolution"]
    assert doc["results"][3]["resolution"] == pytest.approx(lib)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


@pytest.mark.parametrize("argv,words", [
    (["--scheme", "rope", "--lengths", "1024,abc"], "not an integer"),
    (["--scheme", "rope", "--lengths", "0"], "not a positive"),
    (["--scheme", "rope", "--lengths", ""], "comma list"),
    (["--scheme", "rope", "--pattern", "window"], "needs its W"),
    (["--scheme", "nope"], "unknown position scheme"),
    ([], "RUN_DIR"),
])
def test_cli_bad_input_is_one_error_line(argv, words, capsys):
    assert main(["resolution", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and words in err and len(err.strip().splitlines()) == 1


def test_cli_empirical_run_dir(tmp_path, capsys):
    from lexkit.data import corpus as data
    from lexkit.training import runs

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for j in range(40):
        (corpus / f"doc{j}.txt").write_bytes(bytes((7 * j + 3 * i) % 95 + 32 for i in range(700)))
    valid = data.load_corpus(str(corpus)).valid
    assert valid
    model = tiny("alibi", train_len=64)
    run = tmp_path / "run"
    run.mkdir()
    runs.write_json(run / runs.CONFIG, {"model": dataclasses.asdict(model.cfg), "data": {"spec": str(corpus)}})
    runs.save_weights(run, model)
    js, png = tmp_path / "e.json", tmp_path / "e.png"
    argv = ["resolution", str(run), "--lengths", "64,512", "--texts", "2", "--json", str(js), "--plot", str(png)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()]
    assert ["layer", "64", "512"] in rows and any(r[:1] == ["mean"] for r in rows)
    doc = json.loads(js.read_text())
    assert doc["source"] == "empirical" and doc["scheme"] == "alibi" and doc["train_len"] == 64
    for r in doc["results"]:
        assert len(r["per_layer"]) == 2 and len(r["per_head"]) == 2 and len(r["per_head"][0]) == 2
        assert r["texts"] == min(2, len(valid)) and r["entropy"] > 0 and "curve" not in r
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert main(["resolution", str(run), "--heads", "4"]) == 2
    assert "analytic form" in capsys.readouterr().err


@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (1, 1), (6, 1), (1, 6), (9, 3)])
def test_diagonal_sums(shape):
    a = torch.randn(*shape)
    n_q, n_k = shape[-2:]
    got = res.diagonal_sums(a)
    assert got.shape == (*shape[:-2], n_q + n_k + 1)
    for c in range(n_q + n_k + 1):
        offset = c - n_q
        want = torch.diagonal(a.double(), offset, -2, -1).sum(-1) if -n_q < offset < n_k else 0.0
        torch.testing.assert_close(got[..., c], torch.as_tensor(want, dtype=torch.float64).expand(shape[:-2]))


def test_accumulator_takes_any_index_order():
    """The hook protocol allows any query/key indices: the gather path agrees with the skew path."""
    pattern = create_pattern("bca:16")
    n = 40
    q_idx, k_idx = torch.arange(20, 40), torch.arange(0, 40)
    scores = torch.randn(2, 3, 20, 40)
    vis = pattern.visible(q_idx[:, None], k_idx[None, :])
    scores = scores.masked_fill(~vis, -math.inf)
    probs = torch.softmax(scores, -1)
    a, b = res.Accumulator(1, 3, n, pattern), res.Accumulator(1, 3, n, pattern)
    a(0, q_idx, k_idx, scores, probs)
    perm = torch.randperm(40)
    b(0, q_idx, k_idx[perm], scores[..., perm], probs[..., perm])
    torch.testing.assert_close(a.curve(), b.curve())
    torch.testing.assert_close(a.count(), b.count())
    torch.testing.assert_close(a.entropy(), b.entropy())


def test_cli_analytic_refuses_cache_positions_for_absolute_schemes_as_eval_does(capsys):
    assert main(["resolution", "--scheme", "sinusoidal", "--lengths", "64", "--pattern", "sinks:16,pos=cache"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "pos=text" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("spec, words", [
    ("rope:original_len=64", "original_len"),
    ("xpos:original_len=64", "original_len"),
])
def test_spec_keys_that_change_nothing_are_refused(spec, words, capsys):
    assert main(["resolution", "--scheme", spec, "--lengths", "64"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and words in err and "scaling" in err


def test_length_labels_have_one_format():
    from lexkit.core.notation import length_label

    assert [length_label(n, 64) for n in (14, 32, 64, 66, 1024, 64000)] == [
        "14 (0.219x)", "32 (0.5x)", "64 (1x)", "66 (1.03x)", "1024 (16x)", "64000 (1000x)"]


def test_logn_without_a_training_length_is_one_error_for_every_scheme(capsys):
    """One rule, one message, from the library: an absolute scheme does not turn it into a note."""
    for spec in ("sinusoidal", "rope"):
        with pytest.raises(ValueError, match="--logn needs --train-len"):
            res.analytic(spec, [16], logn=True)
    assert main(["resolution", "--scheme", "sinusoidal", "--lengths", "16", "--logn"]) == 2
    assert "--logn needs --train-len" in capsys.readouterr().err
