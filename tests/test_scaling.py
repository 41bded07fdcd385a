"""lexkit.positions.scaling: RoPE scalings (linear, ntk, dynamic, yarn, llama3). Frequencies and
attention factors against the formulas written out (rope_formulas.py) and against transformers'
own functions when it is installed; the scores they give; refusals of bad specs."""

import math

import pytest
import torch

from lexkit import positions
from lexkit.positions import scaling
from rope_formulas import theta, written_out

HD = 16


# -- frequencies and attention factors from the formulas written out -------------------------------
CASES = [
    ("linear", 64, 10000.0, 4.0, 128, {}),
    ("ntk", 64, 10000.0, 8.0, 128, {}),
    ("yarn", 64, 10000.0, 16.0, 128, {}),
    ("yarn", 128, 500000.0, 4.0, 4096, {"beta_fast": 16.0, "beta_slow": 2.0}),
    ("yarn", 64, 10000.0, 16.0, 128, {"attention_factor": 0.5}),  # given: a itself (vLLM #46280 dropped it)
    ("yarn", 128, 10000.0, 40.0, 4096, {"mscale": 1.0, "mscale_all_dim": 0.707}),  # DeepSeek's ratio (vLLM #48621)
    ("yarn", 128, 10000.0, 40.0, 4096, {"mscale": 0.707, "mscale_all_dim": 0.707}),  # equal: a = 1
    ("yarn", 64, 10000.0, 4.0, 128, {"mscale": 2.0}),  # alone: ignored, as transformers does
    ("yarn", 64, 150000.0, 32.0, 4096, {"truncate": False}),  # gpt-oss: the ramp's ends unrounded
    ("llama3", 128, 500000.0, 8.0, 8192, {}),
    ("llama3", 64, 10000.0, 4.0, 128, {"low_freq": 2.0, "high_freq": 8.0}),
]


def scaled_spec(method, base, s, L, extra):
    tail = "".join(f",{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in extra.items())
    return f"rope:base={base},scaling={method},factor={s},original_len={L}" + tail


@pytest.mark.parametrize("method, h, base, s, L, extra", CASES)
def test_scaled_frequencies_match_written_out_formulas(method, h, base, s, L, extra):
    spec = scaled_spec(method, base, s, L, extra)
    rope = positions.create(spec, n_heads=1, head_dim=h)
    got, a = rope.frequencies()
    kw = {"beta_fast": extra.get("beta_fast", 32.0), "beta_slow": extra.get("beta_slow", 1.0),
          "low": extra.get("low_freq", 1.0), "high": extra.get("high_freq", 4.0),
          **{k: extra[k] for k in ("truncate", "attention_factor", "mscale", "mscale_all_dim") if k in extra}}
    want, want_a = written_out(method, h, base, s, L, **kw)
    assert torch.allclose(got, torch.tensor(want, dtype=torch.float64), rtol=1e-12, atol=0)
    assert a == pytest.approx(want_a, rel=1e-12)
    if method in ("yarn", "llama3"):  # the highest frequency is never scaled, the lowest is divided by s
        assert got[0] == pytest.approx(1.0) and got[-1] == pytest.approx(theta(h, base)[-1] / s)


def test_dynamic_ntk_follows_the_current_length():
    rope = positions.create("rope:scaling=dynamic,factor=4,original_len=64", n_heads=1, head_dim=32)
    for n in (10, 64, 100, 256, 1000):
        pos = torch.arange(n)
        got, a = rope.frequencies(pos, pos)
        want, _ = written_out("dynamic", 32, 10000.0, 4.0, 64, n=n)
        assert torch.allclose(got, torch.tensor(want, dtype=torch.float64), rtol=1e-12) and a == 1.0
        if n <= 64:  # inside the original length: plain RoPE
            assert torch.allclose(got, torch.tensor(theta(32, 10000.0), dtype=torch.float64), rtol=1e-12)


def test_scaled_rope_scores_are_the_rotation_by_the_new_frequencies_times_a_squared():
    """score(m, n) = a²/√h Σ_i [(q_i k_i + q_j k_j) cos((m-n)θ'_i) + (q_j k_i - q_i k_j) sin((m-n)θ'_i)],
    j = i + h/2 (rotate-half pairs): a direct float64 sum, for yarn and linear."""
    for spec in ("rope:scaling=yarn,factor=8,original_len=32", "rope:scaling=linear,factor=2"):
        rope = positions.create(spec, n_heads=1, head_dim=HD)
        th, a = rope.frequencies()
        q, k = torch.randn(1, 1, 5, HD, dtype=torch.float64), torch.randn(1, 1, 7, HD, dtype=torch.float64)
        qp, kp = torch.tensor([3, 40, 41, 100, 300]), torch.arange(0, 70, 10)
        got = rope.scores(q, k, qp, kp)[0, 0]
        for x, m in enumerate(qp.tolist()):
            for y, n in enumerate(kp.tolist()):
                tot = 0.0
                for i in range(HD // 2):
                    j = i + HD // 2
                    qi, qj, ki, kj = q[0, 0, x, i], q[0, 0, x, j], k[0, 0, y, i], k[0, 0, y, j]
                    ang = (m - n) * float(th[i])
                    tot += (qi * ki + qj * kj) * math.cos(ang) + (qi * kj - qj * ki) * math.sin(ang)
                assert float(got[x, y]) == pytest.approx(a * a * float(tot) / math.sqrt(HD), rel=1e-9, abs=1e-12)
    # linear: positions divided by s, exactly (m/2, n/2 under plain RoPE)
    plain = positions.create("rope", n_heads=1, head_dim=HD)
    lin = positions.create("rope:scaling=linear,factor=2", n_heads=1, head_dim=HD)
    q, k = torch.randn(1, 1, 4, HD, dtype=torch.float64), torch.randn(1, 1, 4, HD, dtype=torch.float64)
    p = torch.tensor([0, 2, 10, 64])
    half = positions.create("rope", n_heads=1, head_dim=HD)
    from lexkit.positions.rotary import rotary_angles, rotate_half
    cos, sin = rotary_angles(p.double() / 2, HD, 10000.0)
    want = rotate_half(q, cos, sin) @ rotate_half(k, cos, sin).transpose(-1, -2) / math.sqrt(HD)
    assert torch.allclose(lin.scores(q, k, p, p), want, atol=1e-12)
    assert not torch.allclose(plain.scores(q, k, p, p), want) and half is not None


def test_xpos_takes_the_scalings_and_decays_as_before():
    x = positions.create("xpos:scaling=linear,factor=4", n_heads=1, head_dim=HD)
    assert torch.allclose(x.frequencies()[0], torch.tensor(theta(HD, 10000.0), dtype=torch.float64) / 4)
    # decay=false + linear scaling is rope + linear scaling
    a = positions.create("xpos:decay=false,scaling=linear,factor=4", n_heads=1, head_dim=HD)
    b = positions.create("rope:scaling=linear,factor=4", n_heads=1, head_dim=HD)
    q, k, p = torch.randn(1, 1, 6, HD), torch.randn(1, 1, 6, HD), torch.arange(6) * 7
    assert torch.allclose(a.scores(q, k, p, p), b.scores(q, k, p, p), atol=1e-6)


@pytest.mark.parametrize("spec, words", [
    ("rope:scaling=yarn", ["needs a factor"]),
    ("rope:factor=4", ["factor needs a scaling"]),
    ("rope:scaling=warp,factor=2", ["scaling=warp", "linear", "yarn"]),
    ("rope:scaling=linear,factor=2,beta_fast=8", ["beta_fast applies only to scaling=yarn"]),
    ("rope:scaling=linear,factor=2,mscale=1", ["mscale applies only to scaling=yarn"]),
    ("rope:scaling=llama3,factor=2,original_len=64,truncate=false", ["truncate applies only to scaling=yarn"]),
    ("rope:scaling=yarn,factor=2,original_len=64,attention_factor=0", ["attention_factor", "> 0"]),
    ("rope:scaling=llama3,factor=8,original_len=64,low_freq=4,high_freq=2", ["low_freq < high_freq"]),
    ("rope:scaling=linear,factor=0.5", ["factor=0.5", ">= 1"]),
    ("xpos:scaling=dynamic,factor=2,original_len=64", ["dynamic", "decay=false"]),
    ("rope:scaling=yarn,factor=4", ["original_len"]),  # no training length known here
])
def test_bad_scaling_specs_name_the_problem(spec, words):
    with pytest.raises(ValueError) as info:
        positions.create(spec, n_heads=1, head_dim=HD)
    for w in words:
        assert w in str(info.value), (spec, str(info.value))


def test_training_length_fills_original_len_and_w():
    assert positions.create("rope:scaling=yarn,factor=4", 1, HD, max_len=96).values["original_len"] == 96
    pinned = positions.create("rope:scaling=yarn,factor=4,original_len=32", 1, HD, max_len=96)
    assert pinned.values["original_len"] == 32
    assert positions.create("rerope", 1, HD, max_len=96).values["w"] == 96
    assert positions.create("rerope", 1, HD).values["w"] == 512  # the reference's w without a training length


# -- the same functions as transformers, when it is installed ----------------------------------
def hf_reference(method, h, base, s, L, n=None, extra=None):
    tr = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    extra = dict(extra or {})
    rename = {"low_freq": "low_freq_factor", "high_freq": "high_freq_factor"}
    params = {"rope_type": method, "factor": s, "original_max_position_embeddings": L,
              **{rename.get(k, k): v for k, v in extra.items()}}
    if method == "llama3":
        params.setdefault("low_freq_factor", 1.0)
        params.setdefault("high_freq_factor", 4.0)
    cfg = tr.LlamaConfig(hidden_size=h * 2, num_attention_heads=2, head_dim=h, max_position_embeddings=L)
    if hasattr(cfg, "rope_parameters"):  # transformers 5: rope_parameters carries rope_theta
        cfg.rope_parameters = {"rope_theta": base, **params}
    else:  # 4.x
        cfg.rope_theta = base
        cfg.rope_scaling = params
    compute = ROPE_INIT_FUNCTIONS[method]
    return compute(cfg, "cpu", seq_len=n) if n is not None else compute(cfg, "cpu")


@pytest.mark.xdist_group("hf")  # beside test_hf.py under `pytest -n`: one worker imports transformers
@pytest.mark.parametrize("method, h, base, s, L, extra", [c for c in CASES if c[0] != "ntk"])
def test_frequencies_equal_transformers(method, h, base, s, L, extra):
    inv, a = hf_reference(method, h, base, s, L, extra=extra)
    spec = scaled_spec(method, base, s, L, extra)
    got, got_a = positions.create(spec, n_heads=1, head_dim=h).frequencies()
    assert torch.allclose(got, inv.double(), rtol=1e-5, atol=0), (got, inv)  # HF works in float32
    assert got_a == pytest.approx(float(a), rel=1e-6)


@pytest.mark.xdist_group("hf")
def test_dynamic_equals_transformers_at_several_lengths():
    for n in (32, 64, 200, 1024):
        inv, _ = hf_reference("dynamic", 32, 10000.0, 4.0, 64, n=n)
        rope = positions.create("rope:scaling=dynamic,factor=4,original_len=64", n_heads=1, head_dim=32)
        pos = torch.arange(n)
        assert torch.allclose(rope.frequencies(pos, pos)[0], inv.double(), rtol=1e-5)


def test_scaling_registry_matches_docs():
    assert set(scaling.SCALINGS) == {"none", "linear", "ntk", "dynamic", "yarn", "llama3"}
    from pathlib import Path

    doc = (Path(__file__).parents[1] / "docs" / "context-extension.md").read_text()
    words = ("linear", "ntk", "dynamic", "yarn", "llama3", "rerope", "sinks", "logn", "--init", "modeling_rope_utils")
    for name in words:
        assert name in doc, name
