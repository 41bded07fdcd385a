"""ASEntmax's length scale (``+asscale``, lexkit.attention.modifiers.asscale): λ is the formula on the
layer's input and the query positions; it multiplies every score of its query exactly (the layer's
attention is the unscaled layer's on λ·z); zero weights give δ + ln 2; with ``+entmax`` it is ASEntmax;
kernels and the KV cache agree; it trains its weights; a local layer and a second temperature are refused."""

from __future__ import annotations

import math

import pytest
import torch

from kit import assert_kernels_and_cache_agree, assert_trains, sharp_gpt
from lexkit import layouts
from lexkit.attention import kernels
from lexkit.attention.modifiers import ASScale, as_scale


def randomized(state, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in state.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    return state


def test_the_scale_is_the_formula_per_query_and_head_and_starts_at_delta_plus_ln2():
    from lexkit.attention.modifiers.base import Shape

    m = ASScale(delta=0.5)
    state = m.state(Shape(16, 2, 8))
    x = torch.randn(3, 5, 16, generator=torch.Generator().manual_seed(1))
    pos = torch.arange(7, 12)
    torch.testing.assert_close(as_scale(x, pos, state, 0.5), torch.full((3, 2, 5), 0.5 + math.log(2)))
    randomized(state)
    got = as_scale(x, pos, state, 0.5).detach()
    for b in range(3):
        for h in range(2):
            for i in range(5):
                xb = x[b, i].double()
                beta = math.log1p(math.exp(float(state.beta.weight[h].detach().double() @ xb)))
                gamma = 2 * math.tanh(float(state.gamma.weight[h].detach().double() @ xb))
                want = 0.5 + beta * math.log(int(pos[i]) + 2) ** gamma
                assert abs(float(got[b, h, i]) - want) < 1e-5


class AuthorsScale(torch.nn.Module):
    """deep-spin/asentmax (synthetic/src/models/architectures/sparse_gemma.py, ``_apply_length_scaling``
    with ``attn_scale_type="adapt-softplus-tanh"``), written out here for the same weights: a buffer
    log(arange(2, max + 2)), the queries of a pass of q_len after k_len - q_len cached keys sliced from it,
    beta = softplus(W_b x) and gamma = gamma_range * tanh(W_g x) as [b, H, q_len, 1], and
    query_states * (delta + beta * log_position ** gamma)."""

    def __init__(self, beta_proj, gamma_proj, heads: int, delta: float = 1.0, gamma_range: float = 2.0,
                 max_len: int = 64) -> None:
        super().__init__()
        self.attn_scale_beta_proj, self.attn_scale_gamma_proj = beta_proj, gamma_proj
        self.num_scaled_heads, self.attn_scale_delta, self.attn_scale_gamma_range = heads, delta, gamma_range
        self.log_position = torch.log(torch.arange(2, max_len + 2)).reshape(1, 1, -1, 1)

    def forward(self, query_states, hidden_states, q_len, k_len):
        bsz = query_states.shape[0]
        log_position_slice = self.log_position[:, :, k_len - q_len:k_len, :]
        beta = torch.nn.functional.softplus(self.attn_scale_beta_proj(hidden_states))
        beta = beta.view(bsz, q_len, self.num_scaled_heads, 1).transpose(1, 2)
        gamma = self.attn_scale_gamma_range * torch.tanh(self.attn_scale_gamma_proj(hidden_states))
        gamma = gamma.view(bsz, q_len, self.num_scaled_heads, 1).transpose(1, 2)
        return query_states * (self.attn_scale_delta + beta * (log_position_slice ** gamma))


@pytest.mark.parametrize("cached", [0, 5])
def test_the_scale_is_the_authors_on_the_same_weights(cached):
    """The oracle: the reference code's computation on lexkit's weights, for a pass of 7 queries after
    ``cached`` keys (its slice of log positions is lexkit's pos = cached .. cached + 6)."""
    from lexkit.attention.modifiers.base import Shape

    m = ASScale(delta=1.0)
    state = randomized(m.state(Shape(16, 4, 8)), seed=4)
    x = torch.randn(2, 7, 16, generator=torch.Generator().manual_seed(5))
    q = torch.randn(2, 4, 7, 8, generator=torch.Generator().manual_seed(6))
    theirs = AuthorsScale(state.beta, state.gamma, heads=4)(q, x, 7, cached + 7)
    ours, _, _ = m.qkv(q, q, q, state, None, x=x, pos=torch.arange(cached, cached + 7))
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5)


def test_each_query_scores_are_multiplied_by_its_scale():
    net = sharp_gpt("rope@window:4;none@causal+asscale", 1)
    randomized(net.blocks[1].temperature)
    block = net.blocks[1]
    x = torch.randn(1, 9, 32, generator=torch.Generator().manual_seed(2))
    q = torch.randn(1, 2, 9, 16, generator=torch.Generator().manual_seed(3))
    scaled, _, _ = ASScale(delta=1.0).qkv(q, q, q, block.temperature, None, x=x, pos=torch.arange(9))
    lam = as_scale(x, torch.arange(9), block.temperature, 1.0)
    torch.testing.assert_close(scaled, q * lam.unsqueeze(-1))
    with pytest.raises(ValueError, match="needs|needed"):
        ASScale(delta=1.0).qkv(q, q, q, block.temperature, None, x=x)


@pytest.mark.parametrize("layout", ["rope@window:6;none@causal+asscale+entmax", "rope@window:6;none@causal+asscale"])
def test_dense_chunked_the_cache_and_cached_generation_agree(layout, monkeypatch):
    monkeypatch.setattr(kernels.step, "CHUNK", 8)
    net = sharp_gpt(layout, 4)
    randomized(net.blocks[1].temperature)
    assert_kernels_and_cache_agree(net, sharp_gpt(layout.replace("+asscale", ""), 4))


def test_it_trains_its_weights_and_is_a_global_layers_one_temperature():
    net = sharp_gpt("rope@window:6;none@causal+asscale+entmax", 4)
    assert_trains(net, "blocks.1.temperature")
    with pytest.raises(ValueError, match="belongs to a global layer"):
        layouts.parse("rope@window:8+asscale", n_layers=1, train_len=16)
    with pytest.raises(ValueError, match="two temperatures"):
        layouts.parse("none@causal+logn+asscale", n_layers=1, train_len=16)
    with pytest.raises(ValueError, match="delta=0 is out of range"):
        layouts.parse("none@causal+asscale:delta=0", n_layers=1, train_len=16)
