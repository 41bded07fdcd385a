"""FIRE against a float64 transcription of the paper's equations (Li et al. 2023, Sec. 3), written
here: b(i, j) = f(ψ(i - j) / ψ(max(L, i))), ψ(x) = log(c·x + 1), f an MLP 1 -> width -> H."""

from __future__ import annotations

import math

import pytest
import torch

from lexkit import positions
from lexkit import resolution as res


def fire_f64(dist, query, c, big_l, w1, b1, w2):
    """The paper's bias in float64, elementwise over ``dist`` and ``query`` (broadcast): [..., H].
    c and L enter as given (positive); ε = 1e-6 in the denominator, as the reference code adds; the
    MLP's output layer has no bias (the softmax ignores a constant per head)."""
    def psi(x):
        return torch.log(c * x.double() + 1.0)

    x = psi(dist) / (psi(torch.maximum(query.double(), torch.tensor(big_l, dtype=torch.float64))) + 1e-6)
    hidden = torch.relu(x[..., None] * w1.double() + b1.double())  # [..., width]
    return hidden @ w2.double().T  # [..., H]


def make(spec="fire:L=24", heads=3, head_dim=8, **kw):
    return positions.create(spec, n_heads=heads, head_dim=head_dim, **kw)


def params(s):
    return s.w1.detach(), s.b1.detach(), s.w2.detach()


def c_and_l(s) -> tuple[float, float]:
    """c and L as the paper reads them: |c| and |ℓ|·L_0, from the scheme's raw parameters."""
    return abs(float(s.c.detach())), abs(float(s.multiplier.detach())) * s.values["L"]


def causal_bias(s, q_pos, k_pos, dtype=torch.float64):
    """The scheme's bias through its reference scores: q = k = 0, so the score is the bias."""
    zeros_q = torch.zeros(1, s.n_heads, len(q_pos), s.head_dim, dtype=dtype)
    zeros_k = torch.zeros(1, s.n_heads, len(k_pos), s.head_dim, dtype=dtype)
    with torch.no_grad():
        return s.scores(zeros_q, zeros_k, q_pos, k_pos)[0]  # [H, n_q, n_k]


def test_fire_bias_is_the_papers_formula_with_the_query_normaliser():
    s = make()
    with torch.no_grad():
        s.c.fill_(0.3)
        s.multiplier.fill_(1.5)  # L = 1.5 x 24 = 36
    q_pos, k_pos = torch.arange(0, 120, 7), torch.arange(0, 120)
    dist, query = (q_pos[:, None] - k_pos[None, :]).clamp_min(0), q_pos[:, None].expand(-1, len(k_pos))
    assert c_and_l(s) == pytest.approx((0.3, 36.0))
    want = fire_f64(dist, query, *c_and_l(s), *params(s)).permute(2, 0, 1)  # [H, n_q, n_k]
    causal = q_pos[:, None] >= k_pos[None, :]
    got64 = causal_bias(s.double(), q_pos, k_pos)
    assert (got64 - want)[:, causal].abs().max() < 1e-12
    got32 = s.float().forward_bias(120).block(q_pos, dist)  # the kernels' float32 path
    assert (got32.double() - want)[:, causal].abs().max() < 1e-5 * want.abs().max()


def test_fire_normaliser_is_the_maximum_of_l_and_the_query_not_the_minimum():
    """A published copy takes min(L, i): it differs from the paper's max both before L (i < L) and
    past it, and FIRE follows the max (the difference is far above rounding)."""
    s = make().double()
    q_pos, k_pos = torch.tensor([5, 10, 60, 100]), torch.arange(0, 101)
    dist, query = (q_pos[:, None] - k_pos[None, :]).clamp_min(0), q_pos[:, None].expand(-1, len(k_pos))
    got = causal_bias(s, q_pos, k_pos)
    c, big_l = c_and_l(s)
    with_max = fire_f64(dist, query, c, big_l, *params(s)).permute(2, 0, 1)
    with_min = fire_f64(dist, torch.minimum(query, torch.tensor(int(big_l))), c, 0.0, *params(s)).permute(2, 0, 1)
    causal = (q_pos[:, None] >= k_pos[None, :]) & (dist > 0)
    assert (got - with_max)[:, causal].abs().max() < 1e-12
    for row in range(len(q_pos)):  # below L (rows 0, 1) and past it (rows 2, 3)
        assert (got - with_min)[:, row][:, causal[row]].abs().max() > 1e-3, q_pos[row]


def test_fire_learned_values_of_either_sign_enter_as_magnitudes():
    s = make().double()
    with torch.no_grad():
        s.c.fill_(-0.2)
        s.multiplier.fill_(-0.5)  # |ℓ| L_0 = 12
    q_pos, k_pos = torch.arange(0, 40, 3), torch.arange(0, 40)
    dist, query = (q_pos[:, None] - k_pos[None, :]).clamp_min(0), q_pos[:, None].expand(-1, len(k_pos))
    assert c_and_l(s) == pytest.approx((0.2, 12.0))
    want = fire_f64(dist, query, *c_and_l(s), *params(s)).permute(2, 0, 1)
    causal = q_pos[:, None] >= k_pos[None, :]
    assert (causal_bias(s, q_pos, k_pos) - want)[:, causal].abs().max() < 1e-12


def test_fire_initial_values_spec_and_flags():
    s = make("fire", heads=4, head_dim=8, max_len=128)  # L_0 from the training length
    assert s.values == {"width": 32, "c": 0.1, "L": 128} and s.spec == "fire:L=128"
    assert make("fire").values["L"] == 512  # without a training length: the reference's 512
    assert c_and_l(s) == pytest.approx((0.1, 128.0))
    assert s.w1.shape == (32,) and s.b1.shape == (32,) and s.w2.shape == (4, 32) and not hasattr(s, "b2")
    assert s.w1.abs().max() <= 1.0 and s.w2.abs().max() <= 1 / math.sqrt(32)  # nn.Linear's default bounds
    assert s.query_bias and s.per_layer and s.has_bias and not s.relative and s.separable
    with pytest.raises(ValueError, match="depends on the query's position"):
        s.bias_table(10)
    for bad, words in [("fire:width=0", ["width", "> 0"]), ("fire:c=-1", ["c", "> 0"]), ("fire:L=0", ["L"]),
                       ("fire:l=5", ["'l'", "width, c, L"])]:
        with pytest.raises(ValueError) as info:
            make(bad)
        assert all(w in str(info.value) for w in words), (bad, info.value)


def test_fire_init_is_kept_by_the_model():
    """The model's N(0, 0.02) init of its linear layers leaves FIRE's MLP at nn.Linear's defaults."""
    from lexkit import GPT, ModelConfig

    model = GPT(ModelConfig(scheme="fire", n_layers=1, d_model=32, n_heads=2, train_len=16))
    assert model.scheme.w1.abs().max() > 0.5 and model.scheme.values["L"] == 16


def test_fire_analytic_resolution_at_init_is_the_closed_form():
    """q = k = the all-ones vector: s[n] = sqrt(h) + b(N - 1, N - 1 - n), from the initial values
    drawn under the seed."""
    heads, head_dim, n = 4, 16, 300
    scheme = res.make_scheme("fire", heads=heads, head_dim=head_dim, seed=3, train_len=64)
    curve = res.analytic_curve("fire", n, heads=heads, head_dim=head_dim, seed=3, train_len=64)
    dist = torch.arange(n)
    assert c_and_l(scheme) == pytest.approx((0.1, 64.0))
    want = math.sqrt(head_dim) + fire_f64(dist, torch.full((n,), n - 1), *c_and_l(scheme), *params(scheme)).T
    torch.testing.assert_close(curve, want, rtol=1e-6, atol=1e-6)
    r = res.resolution(curve)
    assert r.shape == (heads,) and ((r >= 0) & (r <= 1)).all()
