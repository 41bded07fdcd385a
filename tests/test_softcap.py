"""Attention logit soft-capping (Gemma 2): s -> C tanh(s / C) before the mask, on every kernel.

References are written out here in float64 (scores from the scheme, the temperature, the cap as the
formula, the mask, the softmax), not through lexkit's kernels; flex runs eagerly (the ``eager_flex``
fixture) with the same score_mod and block mask as the compiled kernel."""

from __future__ import annotations

import math

import pytest
import torch

from lexkit import attention, positions
from lexkit.attention import Attention, modifiers
from lexkit.attention.kernels import attend_block
from lexkit.attention.modifiers import Scoring, Sink, SoftCap, soft_cap

H, HD = 2, 8


def reference(q, k, v, scheme, pattern, pos, cap, scale=None, sink=None):
    """float64: softmax over C·tanh(scores·λ / C), masked, with the sink as one more column."""
    idx = torch.arange(len(pos))
    scores = scheme.scores(q.double(), k.double(), pos, pos)  # [b, h, n, n]
    if scale is not None:
        scores = scores * scale.double()[:, None]
    scores = cap * torch.tanh(scores / cap)
    scores = scores.masked_fill(~pattern.visible(idx[:, None], idx[None, :]), -math.inf)
    if sink is not None:
        column = sink.double()[None, :, None, None].expand(*scores.shape[:3], 1)
        return torch.softmax(torch.cat((scores, column), -1), -1)[..., :-1] @ v.double()
    return torch.softmax(scores, -1) @ v.double()


def test_soft_cap_is_the_formula():
    s = torch.tensor([-100.0, -1.0, 0.0, 0.5, 100.0], dtype=torch.float64)
    torch.testing.assert_close(soft_cap(s, 2.0), 2.0 * torch.tanh(s / 2.0))
    assert soft_cap(s, 2.0).abs().max() <= 2.0 and abs(float(soft_cap(torch.tensor(1e-3), 50.0)) - 1e-3) < 1e-9


@pytest.mark.parametrize("spec, temp", [("rope", None), ("alibi", "llama4:floor=8"), ("none", None)])
@pytest.mark.parametrize("pattern", ["causal", "window:16", "chunk:12"])
def test_soft_capped_attention_runs_the_same_on_dense_and_chunked(spec, temp, pattern):
    """Large scores (q, k of norm ~3 sqrt(d)) so the cap of 1.5 changes them."""
    torch.manual_seed(1)
    scheme = positions.create(spec, n_heads=H, head_dim=HD, max_len=64)
    pat = attention.create(pattern)
    t = None if temp is None else modifiers.parse(temp, 16)
    n, cap = 41, 1.5
    pos = torch.arange(n)
    q, k, v = (3 * torch.randn(2, H, n, HD) for _ in range(3))
    sink = torch.tensor([0.5, -1.0])
    with torch.no_grad():
        scale = None if t is None else t.query_scale(None, pos)
        uncapped = reference(q, k, v, scheme, pat, pos, 1e9, scale)
        for s in (None, sink):
            want = reference(q, k, v, scheme, pat, pos, cap, scale, s)
            for kernel in ("dense", "chunked"):
                parts = [m for m in (t, Sink() if s is not None else None, SoftCap(C=cap)) if m is not None]
                got = Attention(scheme, pat, pos, kernel=kernel, scoring=Scoring.of(*parts, states={"sink": s}))(
                    q, k, v)
                assert (got.double() - want).abs().max() <= 1e-5, (kernel, s is not None)
    assert (reference(q, k, v, scheme, pat, pos, cap, scale) - uncapped).abs().max() > 1e-2  # the cap matters


# fast sibling: test_layer_modifiers.py's test_sit_and_a_soft_cap_run_in_flex_score_mod (the cap after ALiBi's bias
# and sit's transform in flex's score_mod, under window:16: one eager flex trace for both)
@pytest.mark.slow
def test_flex_caps_in_its_score_mod(eager_flex):
    """The cap after ALiBi's bias in flex's score_mod, under a window's block mask."""
    torch.manual_seed(2)
    scheme = positions.create("alibi", n_heads=H, head_dim=HD, max_len=256)
    pat = attention.create("window:16")
    n = 130  # past one 128-block of the block mask
    pos = torch.arange(n)
    q, k, v = (3 * torch.randn(1, H, n, HD) for _ in range(3))
    with torch.no_grad():
        got = Attention(scheme, pat, pos, kernel="flex", scoring=Scoring.of(SoftCap(C=2.0)))(q, k, v)
    assert (got.double() - reference(q, k, v, scheme, pat, pos, 2.0)).abs().max() <= 1e-5


def test_the_hook_sees_capped_scores_and_a_bad_cap_is_refused():
    scheme, pat = positions.create("none", n_heads=H, head_dim=HD), attention.create("causal")
    q, k, v = (5 * torch.randn(1, H, 6, HD) for _ in range(3))
    idx = torch.arange(6)
    seen = {}
    with torch.no_grad():
        attend_block(scheme, pat, q, k, v, idx, idx, idx, idx, transformed=False, bias=None,
                     score_fn=SoftCap(C=0.5).score_fn(None), hook=lambda layer, qi, ki, s, p: seen.setdefault("s", s))
    finite = seen["s"][torch.isfinite(seen["s"])]
    assert finite.abs().max() <= 0.5 and finite.numel() == H * 21
    for bad in ("softcap:0", "softcap:-1", "softcap"):
        with pytest.raises(ValueError, match="softcap"):
            modifiers.parse(bad)
