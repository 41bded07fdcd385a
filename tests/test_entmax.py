"""α-entmax attention (``+entmax:A``, lexkit.attention.modifiers.entmax): its weights are the
``entmax`` package's ``entmax_bisect`` (and its exact ``entmax15``) on the same scores; at α = 1.5 and 2
the closed-form threshold equals the bisection; α = 2 is sparsemax by the sort formula; the gradient is
the package's and a finite difference's; rows sum to 1 with exact zeros; on a model dense == chunked ==
the KV cache == cached generation, and it trains; flex, a sink and α outside (1, 16] are refused by name."""

from __future__ import annotations

import pytest
import torch

from kit import assert_kernels_and_cache_agree, assert_trains, sharp_gpt
from lexkit import layouts
from lexkit.attention import kernels
from lexkit.attention.modifiers import entmax_weights


def causal_scores(n: int = 10, seed: int = 0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(2, 3, n, n, generator=gen, dtype=dtype) * 3
    idx = torch.arange(n)
    visible = idx[None, :] <= idx[:, None]
    return z.masked_fill(~visible, float("-inf")), visible, idx


def sparsemax_by_sorting(z: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """Martins & Astudillo 2016: k* = max{k : 1 + k z_(k) > Σ_{j<=k} z_(j)}, τ = (Σ_{j<=k*} z_(j) − 1)/k*."""
    out = torch.zeros_like(z, dtype=torch.float64)
    for index in torch.cartesian_prod(*(torch.arange(s) for s in z.shape[:-1])):
        row = z[tuple(index)].double()[visible[index[-1]]]
        srt = row.sort(descending=True).values
        k = torch.arange(1, len(srt) + 1, dtype=torch.float64)
        support = int((1 + k * srt > srt.cumsum(0)).sum())
        tau = (srt[:support].sum() - 1) / support
        out[tuple(index)][visible[index[-1]]] = (row - tau).clamp_min(0)
    return out


@pytest.mark.parametrize("alpha", [1.25, 1.5, 2.0, 4.0])
def test_the_weights_are_the_entmax_package_on_the_same_scores(alpha):
    entmax = pytest.importorskip("entmax")
    z, visible, idx = causal_scores()
    ours = entmax_weights(z, visible, idx, idx, alpha=alpha)
    torch.testing.assert_close(ours, entmax.entmax_bisect(z, alpha=alpha), rtol=0, atol=1e-6)
    if alpha == 1.5:  # the package's exact sort-based 1.5-entmax
        torch.testing.assert_close(ours, entmax.entmax15(z, dim=-1), rtol=0, atol=1e-6)


@pytest.mark.parametrize("alpha", [1.5, 2.0])
def test_the_closed_form_threshold_is_the_bisection_on_long_masked_rows(alpha):
    """At α = 1.5 and 2 the weights come from the sorted row (one sort, not 50 halvings); they are the
    bisection's on rows of 1 to 300 visible keys (two draws of each length at each scale), scores spread
    wide or nearly tied, in float64."""
    from lexkit.attention.modifiers.entmax import _bisect, _sorted

    gen = torch.Generator().manual_seed(3)
    n = 300
    for scale in (0.01, 1.0, 30.0):
        z = torch.randn(1, 2, n, n, generator=gen, dtype=torch.float64) * scale
        visible = torch.arange(n)[None, :] <= torch.arange(n)[:, None]
        x = (z * (alpha - 1.0)).masked_fill(~visible, float("-inf"))
        exact, bisected = _sorted(x, alpha), _bisect(x, alpha, visible.sum(-1, keepdim=True))
        torch.testing.assert_close(exact, bisected, rtol=0, atol=1e-12)
        assert bool((exact[..., ~visible] == 0).all()) and bool((exact[..., 0, 0] == 1).all())


def test_sparsemax_is_the_sort_formula_rows_sum_to_one_and_small_scores_get_exact_zeros():
    z, visible, idx = causal_scores(8, seed=1)
    ours = entmax_weights(z, visible, idx, idx, alpha=2.0)
    torch.testing.assert_close(ours.double(), sparsemax_by_sorting(z, visible), rtol=0, atol=1e-6)
    torch.testing.assert_close(ours.sum(-1), torch.ones(2, 3, 8))
    assert bool((ours[..., ~visible] == 0).all())
    assert int(((ours == 0) & visible).sum()) > 20  # visible keys with exactly zero weight
    near_softmax = entmax_weights(z / 8, visible, idx, idx, alpha=1.001)  # α -> 1 is the softmax
    torch.testing.assert_close(near_softmax, torch.softmax(z / 8, -1), rtol=0, atol=2e-3)


def test_the_gradient_is_the_closed_form_a_finite_difference_and_the_package():
    z, visible, idx = causal_scores(6, seed=2, dtype=torch.float64)
    z = z.masked_fill(~visible, -1e4)  # finite where not visible, so gradcheck can perturb every input

    # float64 throughout; two heads' rows of 1 to 6 keys (72 inputs: a third of the whole batch's finite differences)
    assert torch.autograd.gradcheck(lambda s: entmax_weights(s, visible, idx, idx, alpha=1.5),
                                    (z[:1, :2].clone().requires_grad_(),))
    entmax = pytest.importorskip("entmax")
    g = torch.randn(z.shape, generator=torch.Generator().manual_seed(5))
    ours_in = z.float().requires_grad_()
    theirs_in = z.float().requires_grad_()
    (entmax_weights(ours_in, visible, idx, idx, alpha=1.5) * g).sum().backward()
    (entmax.entmax_bisect(theirs_in, alpha=1.5) * g).sum().backward()
    torch.testing.assert_close(ours_in.grad, theirs_in.grad, rtol=0, atol=1e-5)


@pytest.mark.parametrize("layout", ["rope@window:6;none@causal+entmax", "rope@window:5+entmax:2;none@causal+logn"])
def test_dense_chunked_the_cache_and_cached_generation_agree(layout, monkeypatch):
    monkeypatch.setattr(kernels.step, "CHUNK", 8)  # several query blocks in 40 tokens
    plain = sharp_gpt(layout.replace("+entmax:2", "").replace("+entmax", ""))
    assert_kernels_and_cache_agree(sharp_gpt(layout), plain)


def test_an_entmax_layer_trains_and_flex_a_sink_and_a_bad_alpha_are_refused_by_name():
    assert_trains(sharp_gpt("rope@window:6;none@causal+entmax"))
    from lexkit.attention.modifiers import Entmax

    assert "entmax attention" in Entmax.flex_refusal and "kernel 'flex'" in Entmax.flex_refusal
    with pytest.raises(ValueError, match="cannot share a layer"):
        layouts.parse("none@causal+entmax+sink", n_layers=1, train_len=16)
    with pytest.raises(ValueError, match="two attentions|one attention|cannot share"):
        layouts.parse("none@causal+entmax+topk:2", n_layers=1, train_len=16)
    for bad in ("1", "0.5", "17"):
        with pytest.raises(ValueError, match=rf"alpha={bad} is out of range \(must be in \(1, 16\]"):
            layouts.parse(f"none@causal+entmax:{bad}", n_layers=1, train_len=16)
