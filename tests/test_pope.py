"""PoPE against x-transformers' own ``PolarEmbedding`` / ``apply_polar_pos_emb`` on the same
weights, and against its closed form written here:
score(m, n) = Σ_c softplus(q_c) softplus(k_c) cos((m - n)·θ_c - δ_hc) / sqrt(h), θ_c = base^(-c/h)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lexkit import positions


def xtransformers():
    return pytest.importorskip("x_transformers.x_transformers",
                               reason="x-transformers (the dev extra) is PoPE's oracle; pip install x-transformers")


def pope_f64(q, k, q_pos, k_pos, phase, base=10000.0):
    """The closed form, float64: [b, H, n_q, n_k]."""
    h = q.shape[-1]
    theta = base ** (-torch.arange(h, dtype=torch.float64) / h)  # [h]
    delta = phase.double().clamp(-2 * math.pi, 0)[None, :, None, None, :]  # [1, H, 1, 1, h]
    angle = (q_pos.double()[:, None] - k_pos.double()[None, :])[..., None] * theta - delta  # [1, H, m, n, h]
    mag = F.softplus(q.double())[..., :, None, :] * F.softplus(k.double())[..., None, :, :]  # [b, H, m, n, h]
    return (mag * torch.cos(angle)).sum(-1) / math.sqrt(h)


def test_pope_scores_equal_x_transformers_on_the_same_weights():
    xt = xtransformers()
    torch.manual_seed(1)
    heads, h, n = 3, 16, 48
    polar = xt.PolarEmbedding(h, heads)
    with torch.no_grad():
        polar.learned_bias.uniform_(-2 * math.pi, 0.0)  # x-transformers' bias_uniform_init
    s = positions.create("pope", n_heads=heads, head_dim=h)
    with torch.no_grad():
        s.phase.copy_(polar.learned_bias[:, 0, :])
    q, k = torch.randn(2, heads, n, h), torch.randn(2, heads, n, h)
    pos = torch.arange(50, 50 + n)
    freqs, bias = polar(pos)
    tq, tk = xt.apply_polar_pos_emb(q, freqs), xt.apply_polar_pos_emb(k, freqs + bias)
    want = tq @ tk.transpose(-1, -2) * h ** -0.5  # x-transformers' attention scale: the head dim's
    got = s.scores(q, k, pos, pos)
    assert (got - want).abs().max() <= 1e-5 * want.abs().max()
    mine_q, mine_k = s.transform_qk(q, k, pos, pos)
    assert mine_q.shape == tq.shape == (2, heads, n, 2 * h)  # the same layout: cos parts, then sin parts
    assert (mine_q - tq).abs().max() < 1e-5 and (mine_k - tk).abs().max() < 1e-5


def test_pope_scores_are_the_closed_form_and_translation_invariant():
    s = positions.create("pope:phase=uniform,base=500", n_heads=2, head_dim=8).double()
    assert (s.phase >= -2 * math.pi).all() and (s.phase <= 0).all() and s.phase.abs().sum() > 0
    q, k = torch.randn(2, 2, 9, 8, dtype=torch.float64), torch.randn(2, 2, 11, 8, dtype=torch.float64)
    q_pos, k_pos = torch.arange(9) * 5 + 30, torch.arange(11) * 3
    want = pope_f64(q, k, q_pos, k_pos, s.phase.detach(), base=500.0)
    assert (s.scores(q, k, q_pos, k_pos) - want).abs().max() < 1e-12
    moved = s.scores(q, k, q_pos + 70000, k_pos + 70000)  # float64 angles: exact far out
    assert (moved - want).abs().max() < 1e-9


def test_pope_phase_is_clamped_to_minus_two_pi_zero_wherever_used():
    s = positions.create("pope", n_heads=1, head_dim=4).double()
    with torch.no_grad():
        s.phase.copy_(torch.tensor([[1.0, -7.0, -1.0, 0.5]]))
    q, k = torch.randn(1, 1, 3, 4, dtype=torch.float64), torch.randn(1, 1, 3, 4, dtype=torch.float64)
    pos = torch.arange(3)
    clamped = torch.tensor([[0.0, -2 * math.pi, -1.0, 0.0]])
    assert (s.scores(q, k, pos, pos) - pope_f64(q, k, pos, pos, clamped)).abs().max() < 1e-12


def test_pope_dense_kernel_passes_the_head_dims_scale_to_sdpa():
    """q and k are 2h wide after the transform: SDPA's default 1/sqrt(2h) would be wrong, so the
    dense (fused causal) and chunked kernels both give the reference's 1/sqrt(h)."""
    from lexkit.attention import Attention, create
    from oracle import reference_attention

    s, pattern = positions.create("pope", n_heads=2, head_dim=16), create("causal")
    q, k, v = (torch.randn(1, 2, 40, 16) for _ in range(3))
    pos = torch.arange(40)
    with torch.no_grad():
        want = reference_attention(q.double(), k.double(), v.double(), s, pattern, pos)
        for kernel in ("dense", "chunked"):
            got = Attention(s, pattern, pos, kernel=kernel)(q, k, v)
            assert got.shape == v.shape and (got.double() - want).abs().max() < 1e-5, kernel
