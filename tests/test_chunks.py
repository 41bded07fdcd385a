"""Chunk selection (``+chunks:C,n``, lexkit.attention.modifiers.chunks): its weights are MoBA's rule
computed directly from the queries and mean-pooled keys (a loop, float64); n = 1 is attention inside
the query's own chunk, n past the chunks is the causal softmax; on a model dense == chunked == the KV
cache == cached generation, and it trains; flex, a sink and bad values are refused by name."""

from __future__ import annotations

import math

import pytest
import torch

from kit import assert_kernels_and_cache_agree, assert_trains, sharp_gpt
from lexkit import layouts
from lexkit.attention import kernels
from lexkit.attention.modifiers import chunk_weights


def qk(n: int = 19, d: int = 8, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 2, n, d, generator=gen, dtype=torch.float64)
    k = torch.randn(1, 2, n, d, generator=gen, dtype=torch.float64)
    idx = torch.arange(n)
    visible = idx[None, :] <= idx[:, None]
    z = (q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(~visible, float("-inf"))
    return q, k, z, visible, idx


def moba(q, k, size: int, chunks: int) -> torch.Tensor:
    """MoBA by loops: gate_c = q_i·mean(K_c) / √d over past chunks, the top n − 1 and the own chunk."""
    b, h, n, d = q.shape
    out = torch.zeros(b, h, n, n, dtype=torch.float64)
    for bi in range(b):
        for hi in range(h):
            for i in range(n):
                own = i // size
                gates = [(float(q[bi, hi, i] @ k[bi, hi, c * size:(c + 1) * size].mean(0)) / math.sqrt(d), c)
                         for c in range(own)]
                chosen = {own} | {c for _, c in sorted(gates, key=lambda t: (-t[0], t[1]))[:chunks - 1]}
                keys = [j for j in range(i + 1) if j // size in chosen]
                logits = torch.stack([q[bi, hi, i] @ k[bi, hi, j] / math.sqrt(d) for j in keys])
                out[bi, hi, i, keys] = torch.softmax(logits, 0)
    return out


@pytest.mark.parametrize("size, chunks", [(4, 2), (5, 3), (3, 1)])
def test_the_weights_are_moba_from_the_queries_and_mean_pooled_keys(size, chunks):
    q, k, z, visible, idx = qk()
    torch.testing.assert_close(chunk_weights(z, visible, idx, idx, size, chunks).double(), moba(q, k, size, chunks),
                               rtol=0, atol=1e-6)


def test_one_chunk_is_the_own_chunk_and_enough_chunks_are_the_causal_softmax():
    q, k, z, visible, idx = qk(seed=1)
    own = chunk_weights(z, visible, idx, idx, 4, 1)
    same_chunk = (idx[:, None] // 4) == (idx[None, :] // 4)
    assert bool((own[..., ~same_chunk] == 0).all())
    torch.testing.assert_close(own, torch.softmax(z.masked_fill(~same_chunk, float("-inf")), -1).float())
    torch.testing.assert_close(chunk_weights(z, visible, idx, idx, 4, 6), torch.softmax(z, -1).float())


@pytest.mark.parametrize("layout", ["rope@window:6;none@causal+chunks:4,n=2", "rope@causal+logn+chunks:5,n=3"])
def test_dense_chunked_the_cache_and_cached_generation_agree(layout, monkeypatch):
    monkeypatch.setattr(kernels.step, "CHUNK", 8)
    assert_kernels_and_cache_agree(sharp_gpt(layout, 4), sharp_gpt(layout.split("+chunks")[0], 4))


def test_a_chunk_selection_layer_trains_and_flex_a_sink_and_bad_values_are_refused_by_name():
    assert_trains(sharp_gpt("rope@window:6;none@causal+chunks:4,n=2", 4))
    from lexkit.attention.modifiers import Chunks

    assert "chunk selection" in Chunks.flex_refusal and "kernel 'flex'" in Chunks.flex_refusal
    with pytest.raises(ValueError, match="cannot share a layer"):
        layouts.parse("none@causal+chunks+sink", n_layers=1, train_len=16)
    with pytest.raises(ValueError, match="two attentions|one attention|cannot share"):
        layouts.parse("none@causal+chunks+entmax", n_layers=1, train_len=16)
    for bad, key in (("chunks:0", "C=0"), ("chunks:4,n=0", "n=0")):
        with pytest.raises(ValueError, match=key):
            layouts.parse(f"none@causal+{bad}", n_layers=1, train_len=16)
