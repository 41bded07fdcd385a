"""Position schemes against closed forms and independent float64 computations.

Every expected value here is computed by a formula written out in this file (float64), never by
calling the code under test a second way.
"""

from __future__ import annotations

import math

import pytest
import torch

from lexkit import positions
from lexkit.positions.bias import alibi_slopes, t5_bucket
from schemes_under_test import RELATIVE, TEN


def make(spec: str, n_heads: int = 4, head_dim: int = 16, **kw):
    return positions.create(spec, n_heads=n_heads, head_dim=head_dim, **kw)


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got - want| / max |want|, in float64."""
    got, want = got.double(), want.double()
    return float((got - want).abs().max() / want.abs().max())


# -- independent rotary reference (float64, explicit 2x2 rotation per pair) ----------------------
def rotary_scores_f64(q, k, q_pos, k_pos, *, base=10000.0, gamma=None, scale_base=512.0, rotate=True,
                      angle_dtype=torch.float64):
    """Pre-softmax scores of RoPE / xPos, written from the definitions, in float64.

    Pair i is dims (i, i + h/2) (rotate-half layout). Its query at m is multiplied by the 2x2
    rotation R(m·θ_i), its key at n by R(n·θ_i), θ_i = base^(-2i/h); the pair's dot product is
    multiplied by ζ_i^((m - n)/B), ζ_i = (2i + γh)/((1 + γ)h) (no decay when gamma is None).
    ``angle_dtype=float32`` evaluates the angle p·θ_i in float32 (the inaccurate way), the
    rest in float64.
    """
    q, k = q.double(), k.double()
    h = q.shape[-1]
    half = h // 2
    i = torch.arange(half, dtype=torch.float64)
    theta = base ** (-2.0 * i / h)  # [h/2]

    def rot(x, pos):
        # x: [b, H, n, h] -> pairs [b, H, n, h/2, 2], rotated by R(pos·θ_i)
        pairs = torch.stack((x[..., :half], x[..., half:]), dim=-1)
        if not rotate:
            return pairs
        ang = (pos.to(angle_dtype)[:, None] * theta.to(angle_dtype)).double()  # [n, h/2]
        c, s = torch.cos(ang), torch.sin(ang)
        R = torch.stack((torch.stack((c, -s), -1), torch.stack((s, c), -1)), -2)  # [n, h/2, 2, 2]
        return torch.einsum("nirc,bhnic->bhnir", R, pairs)

    rq, rk = rot(q, q_pos), rot(k, k_pos)
    per_pair = torch.einsum("bhmir,bhnir->bhimn", rq, rk)  # [b, H, h/2, m, n]
    if gamma is not None:
        zeta = (2 * i + gamma * h) / ((1 + gamma) * h)  # [h/2]
        dist = (q_pos.double()[:, None] - k_pos.double()[None, :])  # [m, n]
        per_pair = per_pair * zeta[:, None, None] ** (dist / scale_base)
    return per_pair.sum(2) / math.sqrt(h)


# -- registry, specs, errors -------------------------------------------------------------------
def test_relative_flag_is_false_exactly_for_the_absolute_embeddings():
    flags = {name: make(name).relative for name in TEN}
    assert [n for n, rel in flags.items() if not rel] == ["sinusoidal", "learned"]


def test_families():
    fam = {name: make(name).family for name in TEN}
    assert fam == {
        "none": "none", "sinusoidal": "absolute", "learned": "absolute", "rope": "rotary", "xpos": "rotary",
        "alibi": "bias", "kerple-power": "bias", "kerple-log": "bias", "sandwich": "bias", "t5": "bias",
    }


@pytest.mark.parametrize(
    "spec, must_name",
    [
        ("nope", ["'nope'", "rope", "alibi", "t5"]),  # unknown scheme: names it, lists the valid ones
        ("rope:bse=1", ["'bse'", "base"]),  # unknown key: names it and lists valid keys
        ("xpos:gamma=-1", ["gamma", "-1", "> 0"]),  # bad value: names key, value and rule
        ("rope:base=abc", ["base", "abc", "float"]),
        ("sandwich:dim=3", ["dim", "3", "even"]),
        ("xpos:decay=maybe", ["decay", "maybe", "bool"]),
        ("t5:buckets=1", ["buckets", ">= 2"]),
        ("learned:max_len=0", ["max_len", "0"]),
        ("t5:max_distance=8", ["max_distance", "8"]),
        ("alibi:slope=1", ["'slope'", "(none)"]),
        ("rope:base=1,,", ["empty parameter"]),
        ("rope:base=1,base=2", ["base", "twice"]),
    ],
)
def test_bad_scheme_specs_raise_valueerror_naming_the_bad_part(spec, must_name):
    with pytest.raises(ValueError) as info:
        make(spec)
    message = str(info.value)
    for part in must_name:
        assert part in message, (spec, message)


def test_specs_parse_typed_values_and_canonicalise():
    s = make("xpos:gamma=0.5,decay=false,scale_base=256")
    unscaled = {"scaling": "none", "factor": None, "original_len": None, "beta_fast": None, "beta_slow": None,
                "attention_factor": None, "mscale": None, "mscale_all_dim": None, "truncate": None,
                "low_freq": None, "high_freq": None,  # the context-extension parameters, unset
                "fraction": None, "heads": None}  # and partial RoPE's: every dimension of every head rotated
    assert s.values == {"base": 10000.0, "gamma": 0.5, "scale_base": 256.0, "decay": False, "rotate": True, **unscaled}
    # canonical spec: only non-default values, and it round-trips
    assert s.spec.startswith("xpos:") and "base=1" not in s.spec and "rotate" not in s.spec
    assert "gamma=0.5" in s.spec and "decay=false" in s.spec and "scale_base=256" in s.spec
    assert make(s.spec).values == s.values and positions.canonical(s.spec) == s.spec
    assert positions.canonical("rope:base=10000") == "rope"
    assert make("t5").values == {"buckets": 32, "max_distance": 128}
    assert make("sandwich").values == {"dim": 128}


def test_learned_default_table_size_comes_from_max_len_unless_spec_gives_one():
    assert make("learned", max_len=77).table.shape == (77, 4 * 16)
    assert make("learned:max_len=20", max_len=77).table.shape == (20, 4 * 16)


# -- absolute schemes ----------------------------------------------------------------------------
def test_sinusoidal_table_is_vaswani():
    s = make("sinusoidal", n_heads=2, head_dim=8)  # d_model 16
    pos = torch.tensor([0, 1, 5, 1000, 70000])
    got = s.embed(pos)
    d = 16
    want = torch.zeros(len(pos), d, dtype=torch.float64)
    for r, p in enumerate(pos.tolist()):
        for i in range(d // 2):
            want[r, 2 * i] = math.sin(p / 10000 ** (2 * i / d))
            want[r, 2 * i + 1] = math.cos(p / 10000 ** (2 * i / d))
    assert got.dtype == torch.float32
    assert (got.double() - want).abs().max() < 1e-6


def test_learned_embed_is_its_table_and_raises_past_it():
    s = make("learned:max_len=10", n_heads=2, head_dim=4)
    assert torch.equal(s.embed(torch.tensor([0, 3, 9])), s.table[[0, 3, 9]])
    with pytest.raises(ValueError, match=r"0\.\.9; position 10 is past the table"):
        s.embed(torch.arange(0, 11))
    with pytest.raises(ValueError, match="max_len"):
        s.embed(torch.tensor([12]))
    with pytest.raises(ValueError, match="position -1 is before the table"):
        s.embed(torch.tensor([-1, 0]))


def test_none_and_absolute_scores_are_plain_scaled_dot_products():
    q, k = torch.randn(2, 3, 5, 8, dtype=torch.float64), torch.randn(2, 3, 7, 8, dtype=torch.float64)
    want = torch.einsum("bhmd,bhnd->bhmn", q, k) / math.sqrt(8)
    for name in ("none", "sinusoidal", "learned"):
        got = make(name, n_heads=3, head_dim=8).scores(q, k, torch.arange(5) + 2, torch.arange(7))
        assert (got - want).abs().max() < 1e-12, name


# -- rotary --------------------------------------------------------------------------------------
def test_xpos_without_decay_equals_rope():
    q, k = torch.randn(2, 4, 40, 16), torch.randn(2, 4, 40, 16)
    pos = torch.arange(100, 140)
    rope = make("rope").scores(q, k, pos, pos)
    xpos = make("xpos:decay=false").scores(q, k, pos, pos)
    assert (rope - xpos).abs().max() <= 1e-6
    # and decay does change it (the comparison is not vacuous)
    assert (make("xpos").scores(q, k, pos, pos) - rope).abs().max() > 1e-2


def test_xpos_zeta_values_for_head_dim_64():
    zeta = (2 * torch.arange(32, dtype=torch.float64) + 0.4 * 64) / (1.4 * 64)
    assert zeta[0] == pytest.approx(0.2857, abs=1e-4) and zeta[-1] == pytest.approx(0.9777, abs=1e-4)
    s = make("xpos", n_heads=1, head_dim=64)
    assert torch.allclose(s.log_zeta.exp(), zeta, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "spec, kw",
    [
        ("rope", {}),
        ("rope:base=500", {"base": 500.0}),
        ("xpos", {"gamma": 0.4}),
        ("xpos:gamma=0.7,scale_base=64,base=2000", {"gamma": 0.7, "scale_base": 64.0, "base": 2000.0}),
        ("xpos:rotate=false", {"gamma": 0.4, "rotate": False}),
        ("xpos:decay=false", {}),
    ],
)
def test_rotary_scores_match_independent_float64_rotation(spec, kw):
    H, h = 3, 16
    q, k = torch.randn(2, H, 24, h, dtype=torch.float64), torch.randn(2, H, 30, h, dtype=torch.float64)
    q_pos = torch.arange(24) * 7 + 50  # queries after all keys, uneven spacing
    k_pos = torch.arange(30) * 3 + 1
    got = make(spec, n_heads=H, head_dim=h).scores(q, k, q_pos, k_pos)
    want = rotary_scores_f64(q, k, q_pos, k_pos, **kw)
    assert rel_err(got, want) < 1e-10


@pytest.mark.parametrize("spec, kw", [("rope", {}), ("xpos", {"gamma": 0.4})])
def test_rotation_accuracy_at_65535_in_float32(spec, kw):
    """float32 scores at positions up to 65,535 match float64 within 1e-5 of max|score|; the same
    comparison with angles evaluated in float32 misses the bound (the test can tell)."""
    H, h = 2, 64
    q_pos = torch.arange(65536 - 48, 65536)
    k_pos = torch.cat((torch.arange(0, 65536, 509), torch.arange(65536 - 400, 65536)))
    q = torch.randn(1, H, len(q_pos), h)
    k = torch.randn(1, H, len(k_pos), h)
    got = make(spec, n_heads=H, head_dim=h).scores(q, k, q_pos, k_pos)
    assert got.dtype == torch.float32
    want = rotary_scores_f64(q, k, q_pos, k_pos, **kw)
    causal = q_pos[:, None] >= k_pos[None, :]
    err = ((got.double() - want).abs() * causal).max() / (want.abs() * causal).max()
    assert err < 1e-5
    sloppy = rotary_scores_f64(q, k, q_pos, k_pos, angle_dtype=torch.float32, **kw)
    assert ((sloppy - want).abs() * causal).max() / (want.abs() * causal).max() > 1e-5


def test_xpos_is_finite_at_131072_positions():
    # head_dim 16 (not 64): the smallest ζ, γ/(1 + γ), and so the largest factor at 131072, do not depend on it
    H, h = 2, 16
    s = make("xpos", n_heads=H, head_dim=h)
    q_pos = torch.arange(131072 - 8, 131072)  # the last queries: the largest distances and decay
    k_pos = torch.arange(0, 131072)
    q, k = torch.randn(1, H, 8, h), torch.randn(1, H, 131072, h)
    scores = s.scores(q, k, q_pos, k_pos)  # [1, H, 8, 131072] float32
    assert scores.dtype == torch.float32
    assert torch.isfinite(scores).all()
    # and correct there: a subset of keys against the float64 definition
    pick = torch.cat((torch.arange(0, 131072, 1021), torch.arange(131072 - 300, 131072)))
    want = rotary_scores_f64(q, k[:, :, pick], q_pos, pick, gamma=0.4)
    got = scores[..., pick]
    causal = q_pos[:, None] >= pick[None, :]
    assert ((got.double() - want).abs() * causal).max() / (want.abs() * causal).max() < 1e-5
    # far keys decay: the pair with the smallest ζ contributes ~0 from 100k tokens back
    assert float(want[..., :50].abs().max()) < float(want[..., -50:].abs().max())


def test_xpos_scores_finite_for_queries_spread_far_apart_in_any_order():
    """Few queries, but their positions span 131k (and are not sorted): scores() must group them by
    position, not by count, or the query factor overflows."""
    H, h = 2, 64
    s = make("xpos", n_heads=H, head_dim=h)
    q_pos = torch.cat((torch.arange(131072 - 16, 131072), torch.arange(0, 16), torch.arange(60000, 60016)))
    q_pos = q_pos[torch.randperm(len(q_pos))]
    k_pos = torch.cat((torch.arange(0, 64), torch.arange(59990, 60016), torch.arange(131072 - 64, 131072)))
    q, k = torch.randn(1, H, len(q_pos), h), torch.randn(1, H, len(k_pos), h)
    got = s.scores(q, k, q_pos, k_pos)
    causal = q_pos[:, None] >= k_pos[None, :]
    assert torch.isfinite(got[..., causal]).all()
    want = rotary_scores_f64(q, k, q_pos, k_pos, gamma=0.4)
    assert ((got.double() - want).abs() * causal).max() / (want.abs() * causal).max() < 1e-5


def test_xpos_scores_split_long_query_spans_without_changing_values():
    """With a tiny scale base the query span one transform may cover is short; scores() splits
    the queries, and the result still matches the definition (and stays finite)."""
    s = make("xpos:scale_base=4", n_heads=1, head_dim=16)
    assert s.max_query_span is not None and s.max_query_span < 200
    n = 400
    q, k = torch.randn(1, 1, n, 16, dtype=torch.float64), torch.randn(1, 1, n, 16, dtype=torch.float64)
    pos = torch.arange(n)
    got = s.scores(q, k, pos, pos)
    want = rotary_scores_f64(q, k, pos, pos, gamma=0.4, scale_base=4.0)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    assert torch.isfinite(got[..., causal]).all()
    assert ((got - want).abs() * causal).max() / (want.abs() * causal).max() < 1e-10


# -- translation invariance ----------------------------------------------------------------------


@pytest.mark.parametrize("name", RELATIVE)
def test_relative_scores_are_translation_invariant(name):
    H, h, n = 4, 16, 48
    s = make(name, n_heads=H, head_dim=h)
    assert s.relative
    q, k = torch.randn(2, H, n, h, dtype=torch.float64), torch.randn(2, H, n, h, dtype=torch.float64)
    pos = torch.arange(n)
    with torch.no_grad():
        base = s.scores(q, k, pos, pos)
        for shift in (1, 37, 1000, 10000):
            moved = s.scores(q, k, pos + shift, pos + shift)
            assert (moved - base).abs().max() <= 1e-4 * base.abs().max(), (name, shift)


# -- ALiBi ---------------------------------------------------------------------------------------
def test_alibi_slopes_power_of_two():
    assert alibi_slopes(8).tolist() == [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]
    assert alibi_slopes(8).tolist() == [2 ** (-8 * h / 8) for h in range(1, 9)]
    assert alibi_slopes(4).tolist() == [2**-2, 2**-4, 2**-6, 2**-8]


def test_alibi_slopes_non_power_of_two():
    # H = 6: P = 4 -> 2^-2, 2^-4, 2^-6, 2^-8; then the 8-head rule 2^-1 .. 2^-8 at even indices
    # (2^-1, 2^-3, 2^-5, 2^-7), the first 2 of them.
    assert alibi_slopes(6).tolist() == [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]
    # H = 12: P = 8 -> 2^-1 .. 2^-8; then the 16-head rule 2^-0.5, 2^-1, 2^-1.5, ... at even
    # indices (2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5, ...), the first 4.
    want12 = [2**-1, 2**-2, 2**-3, 2**-4, 2**-5, 2**-6, 2**-7, 2**-8, 2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]
    assert torch.allclose(alibi_slopes(12), torch.tensor(want12, dtype=torch.float64), rtol=1e-15, atol=0)
    assert alibi_slopes(1).tolist() == [2**-8]


@pytest.mark.parametrize("H", [6, 8, 12])
def test_alibi_bias_is_minus_slope_times_distance(H):
    s = make("alibi", n_heads=H, head_dim=8)
    slopes = alibi_slopes(H)
    table = s.bias_table(50)
    want = -slopes[:, None] * torch.arange(50, dtype=torch.float64)[None, :]
    assert (table.double() - want).abs().max() < 1e-5
    # scores: q·k/sqrt(h) - slope·(m - n)
    q, k = torch.randn(1, H, 6, 8, dtype=torch.float64), torch.randn(1, H, 9, 8, dtype=torch.float64)
    q_pos, k_pos = torch.arange(10, 16), torch.arange(2, 11)
    dist = (q_pos[:, None] - k_pos[None, :]).clamp_min(0).double()
    want_scores = q @ k.transpose(-1, -2) / math.sqrt(8) - slopes[:, None, None] * dist
    assert (s.scores(q, k, q_pos, k_pos) - want_scores).abs().max() < 1e-5


# -- KERPLE --------------------------------------------------------------------------------------
def test_kerple_power_bias_formula():
    s = make("kerple-power", n_heads=3, head_dim=8)
    with torch.no_grad():
        s.a.copy_(torch.tensor([0.5, 1.3, 0.02]))
        s.p.copy_(torch.tensor([1.0, 0.3, 1.9]))
    table = s.bias_table(40).double()
    for hh, (a, p) in enumerate([(0.5, 1.0), (1.3, 0.3), (0.02, 1.9)]):
        for d in range(40):
            assert table[hh, d].item() == pytest.approx(-a * d**p, rel=1e-5, abs=1e-6)


def test_kerple_log_bias_formula():
    s = make("kerple-log", n_heads=3, head_dim=8)
    with torch.no_grad():
        s.a.copy_(torch.tensor([0.5, 1.3, 0.02]))
        s.p.copy_(torch.tensor([1.0, 0.3, 5.0]))
    table = s.bias_table(40).double()
    for hh, (a, p) in enumerate([(0.5, 1.0), (1.3, 0.3), (0.02, 5.0)]):
        for d in range(40):
            assert table[hh, d].item() == pytest.approx(-p * math.log(1 + a * d), rel=1e-5, abs=1e-6)


def test_kerple_init_in_range():
    for name in ("kerple-power", "kerple-log"):
        s = make(name, n_heads=64, head_dim=8)
        assert (s.a >= 0.01).all() and (s.a <= 1).all()
        assert (s.p >= 0.01).all() and (s.p <= 2).all()


def _push(s, sign: float, lr: float = 1e3):
    """One SGD step with a loss built from the bias itself, steering a and p by ``sign``."""
    opt = torch.optim.SGD(s.parameters(), lr=lr)
    opt.zero_grad()
    (sign * s.bias_table(64).sum()).backward()
    opt.step()


@pytest.mark.parametrize(
    "name, sign, a_out, p_out",
    [
        # loss = -sum(bias) = sum(a d^p): descent lowers a and p (below their minima)
        ("kerple-power", -1.0, "low", "low"),
        # loss = +sum(bias): descent raises a and p; p leaves [0.01, 2] from above
        ("kerple-power", 1.0, None, "high"),
        ("kerple-log", -1.0, "low", "low"),
    ],
)
def test_kerple_constraints_hold_after_optimizer_steps(name, sign, a_out, p_out):
    s = make(name, n_heads=4, head_dim=8)
    p_max = 2.0 if name == "kerple-power" else math.inf
    _push(s, sign)
    raw_a, raw_p = s.a.detach().clone(), s.p.detach().clone()
    # the step really pushed the raw parameters out of range
    if a_out == "low":
        assert (raw_a < 0.01).all()
    if p_out == "low":
        assert (raw_p < 0.01).all()
    if p_out == "high":
        assert (raw_p > 2.0).all()
    # before constrain_: the values the bias uses are in range, and the bias uses them
    a, p = s.effective()
    assert (a >= 0.01).all() and (p >= 0.01).all() and (p <= p_max).all()
    assert torch.equal(a, raw_a.clamp(min=0.01))
    assert torch.equal(p, raw_p.clamp(0.01, p_max))
    table = s.bias_table(20).double()
    d = torch.arange(20, dtype=torch.float64)
    a64, p64 = a.detach().double()[:, None], p.detach().double()[:, None]
    want = -a64 * d**p64 if name == "kerple-power" else -p64 * torch.log1p(a64 * d)
    assert torch.isfinite(table).all()
    assert (table - want).abs().max() < 1e-4 * max(1.0, float(want.abs().max()))
    # constrain_ (what the training loop calls after every step) clamps the parameters in place
    s.constrain_()
    assert (s.a >= 0.01).all() and (s.p >= 0.01).all() and (s.p <= p_max).all()
    assert torch.equal(s.a.detach(), a.detach()) and torch.equal(s.p.detach(), p.detach())
    # a parameter at its bound still gets a gradient pointing back inside (it is not stuck)
    s.zero_grad()
    (-sign * s.bias_table(64).sum()).backward()
    assert (s.a.grad != 0).all() and (s.p.grad != 0).all()


def test_kerple_constraints_hold_for_many_random_steps():
    for name in ("kerple-power", "kerple-log"):
        s = make(name, n_heads=4, head_dim=8)
        opt = torch.optim.SGD(s.parameters(), lr=50.0)
        gen = torch.Generator().manual_seed(1)
        for _ in range(20):
            opt.zero_grad()
            w = torch.randn(4, 32, generator=gen)
            (s.bias_table(32) * w).sum().backward()
            opt.step()
            a, p = s.effective()
            assert (a >= 0.01).all() and (p >= 0.01).all()
            if name == "kerple-power":
                assert (p <= 2.0).all()
            s.constrain_()
            assert torch.isfinite(s.bias_table(32)).all()


# -- Sandwich ------------------------------------------------------------------------------------
@pytest.mark.parametrize("H, dim", [(4, 128), (3, 16)])
def test_sandwich_bias_formula(H, dim):
    s = make(f"sandwich:dim={dim}", n_heads=H, head_dim=8)
    table = s.bias_table(300).double()
    for j in range(1, H + 1):
        for d in (0, 1, 2, 7, 50, 123, 299):
            raw = sum(math.cos(d * 10000 ** (-2 * kk / dim)) for kk in range(1, dim // 2 + 1)) - dim / 2
            assert table[j - 1, d].item() == pytest.approx(raw / (8 * j / H), rel=1e-5, abs=1e-4)


def test_sandwich_raw_is_a_dot_product_of_shifted_sinusoids():
    dim = 32
    omega = 10000.0 ** (-2.0 * torch.arange(1, dim // 2 + 1, dtype=torch.float64) / dim)

    def p(m):
        return torch.cat((torch.sin(m * omega), torch.cos(m * omega)))

    s = make(f"sandwich:dim={dim}", n_heads=8, head_dim=8)  # head 8 of 8: divisor 8
    for m, n in [(5, 5), (9, 2), (400, 13), (1000, 0)]:
        want = (p(m) @ p(n) - dim / 2) / 8
        assert s.bias(torch.tensor(7), torch.tensor(m - n)).item() == pytest.approx(want.item(), abs=1e-4)
    assert s.bias(torch.tensor(0), torch.tensor(0)).item() == 0.0


# -- T5 ------------------------------------------------------------------------------------------
def hf_t5_bucket(relative_position: torch.Tensor, num_buckets: int, max_distance: int) -> torch.Tensor:
    """transformers' T5Attention._relative_position_bucket with bidirectional=False, verbatim
    logic; relative_position = memory_position - query_position = n - m."""
    relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
    )
    return torch.where(is_small, relative_position, relative_position_if_large)


@pytest.mark.parametrize("buckets, max_distance", [(32, 128), (16, 64), (8, 20), (32, 1000)])
def test_t5_bucket_matches_hf(buckets, max_distance):
    m = torch.arange(0, 3000)[:, None]
    n = torch.tensor([0, 1, 5, 100, 2999])[None, :]
    got = t5_bucket((m - n).clamp_min(0), buckets, max_distance)
    want = hf_t5_bucket(n - m, buckets, max_distance)
    assert torch.equal(got, want)


def test_t5_bucket_values_by_hand():
    d = torch.tensor([0, 1, 15, 16, 31, 32, 63, 64, 127, 128, 10**6])
    # exact below 16; 16 + floor(16·log(d/16)/log 8) above; capped at 31
    assert t5_bucket(d, 32, 128).tolist() == [0, 1, 15, 16, 21, 21, 26, 26, 31, 31, 31]


def test_t5_bias_is_table_at_bucket_and_head():
    s = make("t5", n_heads=3, head_dim=8)
    with torch.no_grad():
        s.table.copy_(torch.arange(32 * 3, dtype=torch.float32).view(32, 3))
    table = s.bias_table(500)
    d = torch.arange(500)
    bucket = hf_t5_bucket(-d, 32, 128)
    for hh in range(3):
        assert torch.equal(table[hh], (bucket * 3 + hh).float())


# -- partial RoPE ----------------------------------------------------------------------------------
def partial_scores_f64(q, k, q_pos, k_pos, dims, heads=None, **kw):
    """Partial rotary scores from the definition: the first ``dims`` dimensions of each of the last
    ``heads`` heads rotated (and decayed) as a rotary scheme of head dim ``dims``, the rest plain."""
    h, n_heads = q.shape[-1], q.shape[1]
    rotated = rotary_scores_f64(q[..., :dims], k[..., :dims], q_pos, k_pos, **kw) * math.sqrt(dims)
    plain = torch.einsum("bhmd,bhnd->bhmn", q[..., dims:].double(), k[..., dims:].double())
    out = (rotated + plain) / math.sqrt(h)
    if heads is not None:  # the first H - K heads are not rotated at all
        unrotated = torch.einsum("bhmd,bhnd->bhmn", q.double(), k.double()) / math.sqrt(h)
        out[:, : n_heads - heads] = unrotated[:, : n_heads - heads]
    return out


@pytest.mark.parametrize("spec, h, dims, heads, kw", [
    ("rope:fraction=0.25", 16, 4, None, {}),  # GPT-NeoX's 25 % of a head of 16
    ("rope:fraction=0.5,heads=2", 16, 8, 2, {}),  # x-transformers' half, on the last 2 of 3 heads
    ("rope:fraction=0.6", 16, 8, None, {}),  # 9.6 dimensions: 4 whole pairs
    ("xpos:fraction=0.5", 16, 8, None, {"gamma": 0.4}),  # ζ over the rotated dimensions
    ("rope:fraction=0.5,base=500", 16, 8, None, {"base": 500.0}),
    # an odd head rotates when its rotated part is whole pairs, the rest as it is
    ("rope:fraction=0.5", 9, 4, None, {}),  # 4.5 dimensions of a head of 9: 2 whole pairs
    ("rope:fraction=1", 9, 8, None, {}),  # every whole pair of 9; the ninth dimension unrotated
    ("rope:fraction=0.75,heads=1", 9, 6, 1, {}),
    ("xpos:fraction=0.75", 9, 6, None, {"gamma": 0.4}),
])
def test_partial_rope_scores_match_the_definition(spec, h, dims, heads, kw):
    s = make(spec, n_heads=3, head_dim=h)
    assert (s.rot_dims, s.rot_heads) == (dims, heads)
    q, k = torch.randn(2, 3, 12, h, dtype=torch.float64), torch.randn(2, 3, 20, h, dtype=torch.float64)
    q_pos, k_pos = torch.arange(12) * 5 + 40, torch.arange(20) * 2
    want = partial_scores_f64(q, k, q_pos, k_pos, dims, heads, **kw)
    assert rel_err(s.scores(q, k, q_pos, k_pos), want) < 1e-10


def test_a_model_with_odd_heads_trains_with_partial_rope():
    """d_model 36 over 4 heads: heads of 9, 2·floor(0.5·9/2) = 4 dimensions of each rotated; a
    forward and backward pass run. Plain rope on the same heads is refused by name."""
    from lexkit import GPT, ModelConfig

    for spec in ("rope:fraction=0.5", "rerope:w=4,fraction=0.5"):
        model = GPT(ModelConfig(vocab_size=257, n_layers=1, d_model=36, n_heads=4, train_len=16, scheme=spec))
        assert model.scheme.rot_dims == 4
        loss = model(torch.randint(0, 256, (2, 16)), kernel="dense").float().logsumexp(-1).mean()
        loss.backward()
        assert torch.isfinite(loss) and model.blocks[0].qkv.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match=r"a head of 9 dimensions cannot be rotated whole .*\(fraction=1: 8\)"):
        GPT(ModelConfig(vocab_size=257, n_layers=1, d_model=36, n_heads=4, train_len=16, scheme="rope"))


def test_partial_rerope_rotates_the_same_dimensions():
    """Inside its window ReRoPE is RoPE: the partial ones agree there, and differ past it."""
    q, k = torch.randn(1, 2, 30, 16, dtype=torch.float64), torch.randn(1, 2, 30, 16, dtype=torch.float64)
    pos = torch.arange(30)
    rerope = make("rerope:w=8,fraction=0.5,heads=1", n_heads=2, head_dim=16).scores(q, k, pos, pos)
    rope = make("rope:fraction=0.5,heads=1", n_heads=2, head_dim=16).scores(q, k, pos, pos)
    near = (pos[:, None] - pos[None, :] >= 0) & (pos[:, None] - pos[None, :] < 8)
    assert (rerope - rope)[..., near].abs().max() < 1e-12
    assert (rerope - rope)[:, 1][..., ~near].abs().max() > 1e-3  # the rotated head, past w
    assert (rerope - rope)[:, 0].abs().max() < 1e-12  # the unrotated head has no position to clamp


@pytest.mark.parametrize("spec, dims, heads", [("rope:fraction=0.25", 16, None), ("rope:fraction=0.5,heads=1", 32, 1)])
def test_partial_rope_analytic_resolution_is_the_closed_form(spec, dims, heads):
    """q = k = all ones: s[n] = (Σ_{i < r/2} 2 cos(n θ_i) + (h - r)) / sqrt(h), θ_i = 10000^(-2i/r), on
    the rotated heads; sqrt(h) on the others."""
    from lexkit import resolution as res

    h, n, n_heads = 64, 500, 2
    curve = res.analytic_curve(spec, n, heads=n_heads, head_dim=h)
    theta = 10000.0 ** (-2 * torch.arange(dims // 2, dtype=torch.float64) / dims)
    rotated = (2 * torch.cos(torch.arange(n, dtype=torch.float64)[:, None] * theta).sum(-1) + (h - dims)) / math.sqrt(h)
    plain = torch.full((n,), math.sqrt(h), dtype=torch.float64)  # an unrotated head: q·k/sqrt(h) at every distance
    for head in range(n_heads):
        want = rotated if heads is None or head >= n_heads - heads else plain
        torch.testing.assert_close(curve[head], want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("spec, words", [
    ("rope:fraction=0", ["fraction=0", "(0, 1]"]),
    ("xpos:fraction=1.5", ["fraction=1.5", "(0, 1]"]),
    ("rerope:fraction=-0.5", ["fraction=-0.5", "(0, 1]"]),
    ("rope:fraction=0.05", ["fraction=0.05", "no pair", "0.125"]),
    ("rope:heads=5", ["heads=5", "4 heads"]),
    ("rope:heads=0", ["heads=0", "> 0"]),
])
def test_partial_rope_bad_specs(spec, words):
    with pytest.raises(ValueError) as info:
        make(spec, n_heads=4, head_dim=16)
    assert all(w in str(info.value) for w in words), (spec, info.value)


@pytest.mark.parametrize("spec, words", [
    ("rope:fraction=0.2", ["fraction=0.2", "no pair", "0.222"]),  # 1.8 of 9: no whole pair
    ("rope", ["scheme rope", "head of 9", "fraction=F", "fraction=1: 8"]),
    ("xpos", ["scheme xpos", "head of 9", "fraction=F"]),
    ("rerope", ["scheme rerope", "head of 9", "fraction=F"]),
])
def test_an_odd_head_rotated_whole_is_refused(spec, words):
    with pytest.raises(ValueError) as info:
        make(spec, n_heads=4, head_dim=9)
    assert all(w in str(info.value) for w in words), (spec, info.value)


@pytest.mark.parametrize("name", ["alibi", "kerple-power", "kerple-log", "sandwich", "t5", "fire"])
def test_a_forwards_bias_table_is_its_function_tabulated(name):
    """Every kernel reads a bias through one ForwardBias: a bias of the distance alone gathers its
    table, which holds the bias function's values (what flex evaluates) at every distance; FIRE,
    a bias of the query's position too, has no table and evaluates the function per block."""
    s = make(name, n_heads=3, head_dim=8, max_len=32)
    fb = s.forward_bias(200)
    q_pos = torch.tensor([0, 5, 31, 32, 150, 199])
    dist = (q_pos[:, None] - torch.arange(200)[None, :]).clamp_min(0)  # [6, 200]
    with torch.no_grad():
        evaluated = fb.fn(torch.arange(3)[:, None, None], dist[None], q_pos[None, :, None]).float()
        gathered = fb.block(q_pos, dist)
    assert (gathered - evaluated).abs().max() <= 1e-6 * max(1.0, float(evaluated.abs().max()))
    assert (fb.table is None) == (name == "fire") and fb.covers(200) and (fb.table is None or not fb.covers(201))


def test_the_speedruns_half_rotated_rope_is_partial_rope_up_to_a_signed_permutation_of_the_head():
    """modded-nanogpt's Rotary (train_gpt.py): frequencies (1/1024)^linspace(0, 1, d/4) on the first d/4
    rotate-half pairs, zeros on the rest, each pair turned by -θ. It is ``rope:fraction=0.5`` with base
    1024^(m/(m-1)), m = d/4 (the same frequencies: linspace ends at 1/1024), up to a fixed permutation
    of the head's dims and a sign on the pairs' second halves, which the q and k projections absorb:
    the scores of every pair of positions equal."""
    import math

    d, n = 16, 40
    m = d // 4
    scheme = make(f"rope:fraction=0.5,base={1024 ** (m / (m - 1))!r}", n_heads=1, head_dim=d)

    def speedrun(x, pos):  # a transcription of the speedrun's Rotary, float64
        w = (1 / 1024) ** torch.linspace(0, 1, steps=d // 4, dtype=torch.float64)
        theta = pos.double()[:, None] * torch.cat([w, w.new_zeros(d // 4)])[None]
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * theta.cos() + x2 * theta.sin(), -x1 * theta.sin() + x2 * theta.cos()), dim=-1)

    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(1, 1, n, d, dtype=torch.float64, generator=gen) for _ in range(2))
    pos = torch.arange(n)
    want = speedrun(q, pos) @ speedrun(k, pos).transpose(-1, -2) / math.sqrt(d)
    order = [*range(m), *range(d // 2, d // 2 + m), *range(m, 2 * m), *range(d // 2 + m, d)]  # rotated pairs first
    sign = torch.ones(d, dtype=torch.float64)
    sign[m:2 * m] = -1.0  # -θ on a pair is +θ on the pair with its second half negated
    got = scheme.scores(q[..., order] * sign, k[..., order] * sign, pos, pos)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
