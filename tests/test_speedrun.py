"""The nanoGPT speedrun's pieces (``+keyoffset``, ``fitted:c=0.2``; modded-nanogpt train_gpt.py): the key
offset is the speedrun's in-place slice on the same keys, makes a one-layer induction head by hand,
and streams through the KV cache as one pass; the window temperature 0.2·ln(n/L) + 1 is ``fitted:c=0.2``."""

from __future__ import annotations

import math

import pytest
import torch

from kit import assert_kernels_and_cache_agree, sharp_gpt
from lexkit import layouts
from lexkit.attention import kernels
from lexkit.attention.modifiers import offset_keys, parse


@pytest.mark.parametrize("head_dim, fraction", [(8, 0.5), (7, 0.5), (8, 0.25), (6, 1.0)])
def test_the_key_offset_is_the_speedruns_slice_on_the_same_keys(head_dim, fraction):
    k = torch.randn(2, 3, 9, head_dim, generator=torch.Generator().manual_seed(0))  # [b, h, n, hd]
    start = int((1 - fraction) * head_dim)
    theirs = k.transpose(1, 2).clone()  # the speedrun's [B, T, H, D]: k[:, 1:, :, D//2:] = k[:, :-1, :, D//2:]
    theirs[:, 1:, :, start:] = theirs[:, :-1, :, start:].clone()
    torch.testing.assert_close(offset_keys(k, start), theirs.transpose(1, 2), rtol=0, atol=0)
    assert start == (head_dim // 2 if fraction == 0.5 else start)  # F = 0.5 is the speedrun's D // 2
    assert parse("keyoffset").spec == "keyoffset" and parse("keyoffset:0.25").spec == "keyoffset:0.25"


def test_the_key_offset_makes_a_one_layer_induction_head():
    """q_i = 10·e(x_i), k_j = v_j = e(x_j): after the offset, key j carries e(x_{j-1}), so query i lands on
    the token after an earlier x_i and reads it out: the next token, as an induction head predicts."""
    seq = torch.tensor([8, 3, 7, 1, 4, 6, 2, 0, 5, 3, 7, 1, 4, 6, 2, 0, 5])  # a start token, 8 tokens twice
    e = torch.eye(9)[seq][None, None]  # [1, 1, n, 9]
    k = offset_keys(e, 0)  # every dim shifted: k_j = e(x_{j-1})
    n = len(seq)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    weights = torch.softmax((10 * e @ k.transpose(-1, -2)).masked_fill(~causal, float("-inf")), dim=-1)
    predicted = (weights @ e)[0, 0].argmax(-1)  # [n]
    assert torch.equal(predicted[9:-1], seq[10:])  # the second half: every next token from the first
    without = torch.softmax((10 * e @ e.transpose(-1, -2)).masked_fill(~causal, float("-inf")), dim=-1)
    assert torch.equal((without @ e)[0, 0].argmax(-1), seq)  # no offset: the head finds the token itself


@pytest.mark.parametrize("layout", ["rope@window:6;none@causal+keyoffset+fitted:c=0.2",
                                    "rope:fraction=0.5@causal+keyoffset:0.5;none@causal+fitted:c=0.2"])
def test_dense_chunked_the_cache_and_cached_generation_agree(layout, monkeypatch):
    monkeypatch.setattr(kernels.step, "CHUNK", 8)
    plain = sharp_gpt(layout.replace("+keyoffset:0.5", "").replace("+keyoffset", ""), 1)
    assert_kernels_and_cache_agree(sharp_gpt(layout, 1), plain)


def test_the_speedruns_window_temperature_is_fitted_at_c_0_2_and_a_bad_offset_is_refused():
    """modded-nanogpt: attn_scale *= 0.2·ln(new_window/old_window) + 1; per query, n = m + 1 keys."""
    t = parse("fitted:c=0.2", train_len=16)
    pos = torch.arange(64)
    expected = torch.tensor([1 + 0.2 * math.log(max(m + 1, 16) / 16) for m in range(64)])
    torch.testing.assert_close(t.query_scale(None, pos), expected, rtol=0, atol=1e-6)
    assert abs(float(t.query_scale(None, pos)[63]) - (0.2 * math.log(4) + 1)) < 1e-6  # n = 4L: 0.2 ln 4 + 1
    for bad in ("0", "1.5"):
        with pytest.raises(ValueError, match=rf"F={bad} is out of range \(must be in \(0, 1\]\)"):
            layouts.parse(f"none@causal+keyoffset:{bad}", n_layers=1, train_len=16)
