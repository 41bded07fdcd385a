"""Attention patterns: exact visible-key sets written out by hand, reach bounds, spec errors."""

from __future__ import annotations

import random

import pytest
import torch

from lexkit import attention, positions
from lexkit.attention import Attention


def visible_sets(spec: str, n: int, **kw) -> list[list[int]]:
    p = attention.create(spec, **kw)
    idx = torch.arange(n)
    grid = p.visible(idx[:, None], idx[None, :])
    assert grid.shape == (n, n) and grid.dtype == torch.bool
    return [torch.nonzero(grid[m]).flatten().tolist() for m in range(n)]


def test_causal_sets():
    assert visible_sets("causal", 5) == [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3], [0, 1, 2, 3, 4]]


def test_window_sets_n8_w4():
    assert visible_sets("window:4", 8) == [
        [0],
        [0, 1],
        [0, 1, 2],
        [0, 1, 2, 3],
        [1, 2, 3, 4],
        [2, 3, 4, 5],
        [3, 4, 5, 6],
        [4, 5, 6, 7],
    ]


def test_window_sets_n6_w1_and_w3():
    assert visible_sets("window:1", 6) == [[0], [1], [2], [3], [4], [5]]
    assert visible_sets("window:W=3", 6) == [[0], [0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5]]


def test_chunk_sets_n8_w3():
    # chunks {0,1,2} {3,4,5} {6,7}: own chunk causally, nothing before it (Llama 4)
    assert visible_sets("chunk:3", 8) == [[0], [0, 1], [0, 1, 2], [3], [3, 4], [3, 4, 5], [6], [6, 7]]
    assert attention.create("chunk:3").reach == 3


def test_bca_sets_n8_w4():
    # blocks of 2: {0,1} {2,3} {4,5} {6,7}; own block causally + all of the previous block
    assert visible_sets("bca:4", 8) == [
        [0],
        [0, 1],
        [0, 1, 2],
        [0, 1, 2, 3],
        [2, 3, 4],
        [2, 3, 4, 5],
        [4, 5, 6],
        [4, 5, 6, 7],
    ]


def test_bca_sets_n8_w6_partial_last_block():
    # blocks of 3: {0,1,2} {3,4,5} {6,7}
    assert visible_sets("bca:6", 8) == [
        [0],
        [0, 1],
        [0, 1, 2],
        [0, 1, 2, 3],
        [0, 1, 2, 3, 4],
        [0, 1, 2, 3, 4, 5],
        [3, 4, 5, 6],
        [3, 4, 5, 6, 7],
    ]


def test_bca_sets_w2_is_previous_token_and_self_at_block_starts():
    # blocks of 1: each token sees itself and the one before
    assert visible_sets("bca:2", 5) == [[0], [0, 1], [1, 2], [2, 3], [3, 4]]


def test_dense_mask_is_zero_where_visible_and_minus_inf_elsewhere():
    scheme = positions.create("none", n_heads=1, head_dim=4)
    for spec in ("window:4", "bca:4"):
        mask = Attention(scheme, attention.create(spec), torch.arange(8), kernel="dense").dense_mask()
        for m, keys in enumerate(visible_sets(spec, 8)):
            row = mask[0, 0, m]  # [1, heads, n, n]
            assert row[keys].eq(0).all()
            assert torch.isneginf(row[[j for j in range(8) if j not in keys]]).all()


@pytest.mark.parametrize("name", ["window", "bca"])
def test_reach_is_a_true_bound_on_random_sizes(name):
    rng = random.Random(7)
    for _ in range(40):
        W = rng.randrange(1, 60)
        if name == "bca":
            W = 2 * rng.randrange(1, 30)
        n = rng.randrange(1, 200)
        p = attention.create(f"{name}:{W}")
        idx = torch.arange(n)
        vis = p.visible(idx[:, None], idx[None, :])
        dist = idx[:, None] - idx[None, :]
        assert p.reach == W
        assert (dist[vis] >= 0).all() and (dist[vis] < p.reach).all(), (name, W, n)
        assert vis.diagonal().all()  # every query sees itself
        if n >= W:  # and the bound is tight: some pair at distance reach - 1 is visible
            assert int(dist[vis].max()) == W - 1


def test_causal_reach_is_unbounded():
    assert attention.create("causal").reach is None


def test_pattern_predicates_broadcast_like_mask_mod_scalars():
    """mask_mod calls the predicate with 0-d index tensors."""
    p = attention.create("bca:4")
    assert bool(p.visible(torch.tensor(5), torch.tensor(2))) is True
    assert bool(p.visible(torch.tensor(5), torch.tensor(1))) is False
    assert bool(attention.create("window:4").visible(torch.tensor(5), torch.tensor(1))) is False


@pytest.mark.parametrize(
    "spec, must_name",
    [
        ("window:0", ["W", "0", "> 0"]),
        ("window:-4", ["W", "-4"]),
        ("bca:3", ["W", "3", "even"]),
        ("bca:0", ["W", "0"]),
        ("window:abc", ["W", "abc", "int"]),
        ("ring:4", ["'ring'", "causal", "window", "bca"]),
        ("window:x=3", ["'x'", "W"]),
        ("causal:3", ["'3'"]),
        ("window", ["window", "W"]),  # no W and no training length
        ("bca", ["bca", "W"]),
    ],
)
def test_bad_pattern_specs_raise_valueerror_naming_the_bad_part(spec, must_name):
    with pytest.raises(ValueError) as info:
        attention.create(spec)
    for part in must_name:
        assert part in str(info.value), (spec, str(info.value))


def test_w_defaults_to_the_training_length():
    assert attention.create("window", default_window=128).spec == "window:128"
    assert attention.create("bca", default_window=64).values == {"W": 64}
    assert attention.create("window:16", default_window=128).spec == "window:16"
    with pytest.raises(ValueError, match="even"):
        attention.create("bca", default_window=7)


def test_spec_forms_are_equivalent_and_canonical():
    assert attention.create("window:W=128") == attention.create("window:128")
    assert hash(attention.create("bca:W=64")) == hash(attention.create("bca:64"))
    assert attention.create("bca:64").spec == "bca:64"
    assert attention.create("causal").spec == "causal"
    assert attention.create("window:64") != attention.create("bca:64")


def test_both_is_the_intersection_of_two_patterns():
    from lexkit.attention import Both, create

    window, bca = create("window:6"), create("bca:8")
    both = Both(window, bca)
    q, k = torch.arange(20)[:, None], torch.arange(20)[None, :]
    assert torch.equal(both.visible(q, k), window.visible(q, k) & bca.visible(q, k))
    assert both.reach == min(window.reach, bca.reach) and both.spec == "window:6&bca:8"
    assert Both(create("causal"), create("causal")).reach is None
