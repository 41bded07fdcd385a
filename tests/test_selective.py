"""Selective attention (``+selective``, lexkit.attention.modifiers.selective): its weights are
x-transformers' ``selective_attn`` then the softmax on the same scores, and a loop over the formula;
the penalty is carried across query blocks and cache pieces, so dense == chunked == the KV cache ==
cached generation; it trains (head 0 learns through the penalty); flex and a sink are refused."""

from __future__ import annotations

import pytest
import torch

from kit import assert_kernels_and_cache_agree, assert_trains, sharp_gpt
from lexkit import layouts
from lexkit.attention import kernels
from lexkit.attention.modifiers import selective_weights


def causal_scores(n: int = 10, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(2, 3, n, n, generator=gen, dtype=torch.float64) * 2
    idx = torch.arange(n)
    visible = idx[None, :] <= idx[:, None]
    return z.masked_fill(~visible, float("-inf")), visible, idx


def by_the_formula(z: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """softmax_j(z_ij - sum_{k<i, k!=j, j!=0} relu(z[head 0]_kj)) by loops, in float64."""
    b, h, n, _ = z.shape
    pen = torch.zeros(b, n, n, dtype=torch.float64)
    for i in range(n):
        for j in range(1, n):
            for k in range(i):
                if k != j and visible[k, j]:
                    pen[:, i, j] += torch.relu(z[:, 0, k, j])
    return torch.softmax(z - pen[:, None], dim=-1)


def test_the_weights_are_the_formula_and_x_transformers_selective_attn():
    z, visible, idx = causal_scores()
    ours = selective_weights(z, visible, idx, idx)
    torch.testing.assert_close(ours.double(), by_the_formula(z, visible), rtol=0, atol=1e-6)
    attend = pytest.importorskip("x_transformers.attend")
    masked = z.float().masked_fill(~visible, -torch.finfo(torch.float32).max)
    theirs = torch.softmax(attend.selective_attn(masked), dim=-1)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    assert (ours - torch.softmax(z.float(), -1)).abs().max() > 1e-2  # the penalty changes the weights


def test_head_zero_learns_through_the_penalty_it_puts_on_the_other_heads():
    z, visible, idx = causal_scores()
    z = z.float().requires_grad_()
    selective_weights(z, visible, idx, idx)[:, 1:].mul(torch.randn(2, 2, 10, 10)).sum().backward()
    assert bool((z.grad[:, 0].masked_fill(~visible, 0).abs() > 0).any())  # heads 1-2's loss reaches head 0


def test_the_penalty_carried_across_query_blocks_equals_one_block():
    z, visible, idx = causal_scores(12, seed=1)
    whole = selective_weights(z, visible, idx, idx)
    carry: dict = {}
    parts = [selective_weights(z[..., s:s + 5, :s + 5], visible[s:s + 5, :s + 5], idx[s:s + 5], idx[:s + 5],
                               carry=carry)[..., :] for s in range(0, 12, 5)]
    for s, part in zip(range(0, 12, 5), parts):
        torch.testing.assert_close(part, whole[..., s:s + 5, :s + 5], rtol=0, atol=1e-6)
    assert carry["selective"].shape == (2, 12)


@pytest.mark.parametrize("layout", ["rope@window:6;none@causal+selective", "rope@window:5+selective;none@causal"])
def test_dense_chunked_the_cache_and_cached_generation_agree(layout, monkeypatch):
    monkeypatch.setattr(kernels.step, "CHUNK", 8)  # several query blocks in 40 tokens
    assert_kernels_and_cache_agree(sharp_gpt(layout), sharp_gpt(layout.replace("+selective", "")))


def test_a_selective_layer_trains_and_flex_and_a_sink_are_refused_by_name():
    assert_trains(sharp_gpt("rope@window:6;none@causal+selective"))
    from lexkit.attention.modifiers import Selective

    assert "selective attention" in Selective.flex_refusal and "kernel 'flex'" in Selective.flex_refusal
    with pytest.raises(ValueError, match="cannot share a layer"):
        layouts.parse("none@causal+selective+sink", n_layers=1, train_len=16)
    with pytest.raises(ValueError, match="two attentions|one attention|cannot share"):
        layouts.parse("none@causal+selective+topk:2", n_layers=1, train_len=16)
    with pytest.raises(ValueError, match="selective"):
        layouts.parse("none@causal+selective:3", n_layers=1, train_len=16)
