"""Attention temperatures (log-n, Llama 4's, SSMax) and the learned sink logit: each equals its
formula, written here (and Llama 4's, transformers' own code), on every kernel and through the
KV cache; what a kernel cannot run is refused by name."""

from __future__ import annotations

import math

import pytest
import torch

from lexkit import attention, positions
from lexkit.attention import Attention, modifiers
from lexkit.attention.kernels import attend_block
from lexkit.attention.modifiers import Scoring, Shape, Sink
from oracle import reference_attention

H, HD = 2, 8


def temperature(spec, heads=H, train_len=16):
    """(the temperature modifier, its learned state or None) as a layer of ``heads`` heads builds them."""
    t = modifiers.parse(spec, train_len)
    return t, t.state(Shape(heads * HD, heads, train_len))


def test_logn_is_the_log_n_formula():
    t, state = temperature("logn")
    assert t.spec == "logn:L=16"  # the training length pinned into the spec
    m = torch.arange(0, 300)
    want = torch.tensor([max(1.0, math.log(i + 1) / math.log(16)) for i in range(300)])
    assert torch.allclose(t.query_scale(state, m).double(), want.double(), rtol=0, atol=1e-6)


def test_llama4_is_its_formula_and_one_for_the_first_floor_minus_one_positions():
    t, state = temperature("llama4:beta=0.2")  # floor: the training length
    assert t.spec == "llama4:beta=0.2,floor=16"
    m = torch.arange(0, 200)
    want = torch.tensor([1 + 0.2 * math.log(math.floor((i + 1) / 16) + 1) for i in range(200)])
    assert torch.allclose(t.query_scale(state, m).double(), want.double(), rtol=0, atol=1e-6)
    # 1 while m + 1 < F (positions 0 .. F-2); position F-1 already gets 1 + beta ln 2 (docs/layouts.md)
    assert bool((t.query_scale(state, torch.arange(15)) == 1).all())
    assert float(t.query_scale(state, torch.tensor([15]))) == pytest.approx(1 + 0.2 * math.log(2), abs=1e-6)


def test_ssmax_is_s_times_log_n_per_head_and_starts_at_one_at_the_training_length():
    t, state = temperature("ssmax")
    assert torch.allclose(t.query_scale(state, torch.tensor([15]))[:, 0], torch.ones(H))  # s = 1/ln L at init
    with torch.no_grad():
        state.s.copy_(torch.tensor([0.5, 2.0]))
    m = torch.arange(0, 40)
    want = torch.tensor([[s * math.log(i + 1) for i in range(40)] for s in (0.5, 2.0)])
    got = t.query_scale(state, m)
    assert got.shape == (H, 40) and torch.allclose(got.double(), want.double(), atol=1e-5)
    assert t.slot == "temperature" and temperature("logn")[1] is None  # learned state: ssmax's only


@pytest.mark.xdist_group("hf")  # beside test_hf.py under `pytest -n`: one worker imports transformers
def test_llama4_equals_transformers_own_temperature():
    """transformers' Llama4TextAttention on a NoPE layer scales its queries before the attention
    function; a registered attention function reads them, and they equal q times lexkit's llama4."""
    tf = pytest.importorskip("transformers")
    from transformers.models.llama4 import modeling_llama4

    config = tf.Llama4TextConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 num_key_value_heads=2, head_dim=8, no_rope_layers=[0], attn_temperature_tuning=True,
                                 floor_scale=4, attn_scale=0.3, vocab_size=10)
    seen = {}

    def capture(module, query, key, value, attention_mask, **kwargs):
        seen["query"] = query.detach().clone()  # [b, heads, n, d]
        return value.transpose(1, 2), None

    tf.AttentionInterface.register("lexkit_capture", capture)
    config._attn_implementation = "lexkit_capture"
    torch.manual_seed(0)
    layer = modeling_llama4.Llama4TextAttention(config, layer_idx=0).eval()
    x = torch.randn(1, 23, 16)
    with torch.no_grad():
        layer(x, position_embeddings=None, attention_mask=None)
        q = layer.q_proj(x).view(1, 23, 2, 8).transpose(1, 2)
    t, state = temperature("llama4:beta=0.3,floor=4", 2, 64)
    ours = t.query_scale(state, torch.arange(23))
    assert torch.allclose(seen["query"], q * ours[:, None], rtol=1e-6, atol=1e-6)


# -- on every kernel ------------------------------------------------------------------------------
def reference(q, k, v, scheme, pattern, pos, scale=None, sink=None):
    """float64 softmax over the masked scores times the temperature, with the sink as one more
    column of value 0 (written out, not through lexkit's kernels)."""
    idx = torch.arange(len(pos))
    scores = scheme.scores(q.double(), k.double(), pos, pos)  # [b, h, n, n]
    if scale is not None:
        scores = scores * (scale.double()[:, None] if scale.dim() == 1 else scale.double()[:, :, None])
    scores = scores.masked_fill(~pattern.visible(idx[:, None], idx[None, :]), -math.inf)
    if sink is not None:
        column = sink.double()[None, :, None, None].expand(*scores.shape[:3], 1)
        probs = torch.softmax(torch.cat((scores, column), -1), -1)[..., :-1]
    else:
        probs = torch.softmax(scores, -1)
    return probs @ v.double()


@pytest.mark.parametrize("spec, temp", [("alibi", "ssmax"), ("rope", "llama4:floor=8"), ("kerple-log", "logn")])
@pytest.mark.parametrize("pattern", ["causal", "window:16", "chunk:12"])
def test_temperatures_and_sinks_run_the_same_on_dense_and_chunked(spec, temp, pattern):
    torch.manual_seed(1)
    scheme = positions.create(spec, n_heads=H, head_dim=HD, max_len=64)
    pat = attention.create(pattern)
    t, state = temperature(temp)
    if state is not None:
        with torch.no_grad():
            state.s.copy_(torch.tensor([0.3, 0.9]))
    n = 41
    pos = torch.arange(3, 3 + n)
    q, k, v = (torch.randn(2, H, n, HD) for _ in range(3))
    sink = torch.tensor([0.5, -1.0])
    with torch.no_grad():
        scale = t.query_scale(state, pos)
        for s in (None, sink):
            want = reference(q, k, v, scheme, pat, pos, scale, s)
            scoring = Scoring.of(t, *([Sink()] if s is not None else []), states={"temperature": state, "sink": s})
            for kernel in ("dense", "chunked"):
                got = Attention(scheme, pat, pos, kernel=kernel, scoring=scoring)(q, k, v)
                assert (got.double() - want).abs().max() <= 1e-5, (kernel, s is not None)


def test_a_sink_takes_probability_mass_and_its_absence_changes_nothing():
    scheme, pat = positions.create("none", n_heads=H, head_dim=HD), attention.create("causal")
    q, k, v = (torch.randn(1, H, 5, HD) for _ in range(3))
    idx, pos = torch.arange(5), torch.arange(5)
    with torch.no_grad():
        plain = attend_block(scheme, pat, q, k, v, idx, idx, pos, pos, transformed=False, bias=None)
        assert torch.allclose(plain, reference_attention(q, k, v, scheme, pat, pos), atol=1e-6)
        seen = {}
        hook = lambda layer, qi, ki, s, p: seen.setdefault("p", p)  # noqa: E731
        attend_block(scheme, pat, q, k, v, idx, idx, pos, pos, transformed=False, bias=None,
                     sink=torch.tensor([20.0, -20.0]), hook=hook)
    mass = seen["p"].sum(-1)[0]  # [heads, n]: what the visible keys get
    assert bool((mass[0] < 1e-6).all()) and torch.allclose(mass[1], torch.ones(5), atol=1e-6)


def test_flex_refuses_a_sink_by_name():
    scheme, pat = positions.create("rope", n_heads=H, head_dim=HD), attention.create("causal")
    scoring = Scoring.of(Sink(), states={"sink": torch.zeros(H)})
    with pytest.raises(ValueError, match="flex.*sink"):
        Attention(scheme, pat, torch.arange(8), kernel="flex", scoring=scoring)
    assert Attention(scheme, pat, torch.arange(8), scoring=scoring).kernel in ("dense", "chunked")


def test_two_factors_per_query_multiply():
    """A scoring of two scale modifiers (a user's own beside a temperature) scales by their product."""
    logn, _ = temperature("logn")
    llama, _ = temperature("llama4:floor=4")
    pos = torch.arange(50)
    both = Scoring.of(logn, llama).query_scale(pos)
    assert torch.allclose(both, logn.query_scale(None, pos) * llama.query_scale(None, pos))
