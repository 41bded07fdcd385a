"""The contextual schemes, CoPE and the forgetting gates (FoX), against x-transformers' own modules
on the same weights (``CoPE``, ``DataDependentAlibi``) and against their definitions written
here in float64: CoPE's gated counts p_ij = Σ_{t=j..i} σ(q_i·k_t/√h) over visible keys, and FoX's
F_i - F_j = Σ_{t=j+1..i} log σ(w·x_t + b)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lexkit import attention, positions


def xtransformers():
    return pytest.importorskip("x_transformers.x_transformers",
                               reason="x-transformers (the dev extra) is CoPE's and FoX's oracle; "
                               "pip install x-transformers")


def cope_f64(q, k, e, visible):
    """CoPE scores by their definition, one (query, key) pair at a time: [b, H, n_q, n_k]."""
    q, k, e = q.double(), k.double(), e.double()
    b, heads, n_q, h = q.shape
    n_k, top = k.shape[2], e.shape[0] - 1
    out = torch.zeros(b, heads, n_q, n_k, dtype=torch.float64)
    for i in range(n_q):
        for j in range(n_k):
            gates = [torch.sigmoid((q[:, :, i] * k[:, :, t]).sum(-1) / math.sqrt(h))  # [b, H]
                     for t in range(j, n_k) if visible[i, t]]
            p = torch.stack(gates).sum(0).clamp(max=top) if gates else torch.zeros(b, heads, dtype=torch.float64)
            lo, hi = p.floor().long(), p.ceil().long()
            e_p = (p - lo)[..., None] * e[hi] + (1 - p + lo)[..., None] * e[lo]  # e interpolated: [b, H, h]
            out[:, :, i, j] = (q[:, :, i] * k[:, :, j]).sum(-1) / math.sqrt(h) + (q[:, :, i] * e_p).sum(-1)
    return out


def test_cope_equals_x_transformers_on_the_same_weights():
    xt = xtransformers()
    torch.manual_seed(2)
    heads, h, n, top = 3, 16, 40, 8
    ref = xt.CoPE(h, heads, top)
    with torch.no_grad():
        ref.pos_emb.normal_()
    s = positions.create(f"cope:max_pos={top}", n_heads=heads, head_dim=h)
    with torch.no_grad():
        s.pos_emb.copy_(ref.pos_emb)
    q, k = torch.randn(2, heads, n, h), torch.randn(2, heads, n, h)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    sim = (q @ k.transpose(-1, -2) * h ** -0.5).masked_fill(~causal, -torch.finfo(torch.float32).max)
    want = sim + ref(q, sim)  # Attend: the gates read the scaled, masked logits
    got = s.scores(q, k, torch.arange(n), torch.arange(n))
    assert (got - want)[..., causal].abs().max() <= 1e-5 * want[..., causal].abs().max()


@pytest.mark.parametrize("pattern_spec", ["causal", "window:5", "sinks:4,K=2"])
def test_cope_counts_only_the_visible_keys_between_key_and_query(pattern_spec):
    s = positions.create("cope:max_pos=6", n_heads=2, head_dim=8).double()
    with torch.no_grad():
        s.pos_emb.normal_()
    n = 14
    q, k = torch.randn(1, 2, n, 8, dtype=torch.float64) * 2, torch.randn(1, 2, n, 8, dtype=torch.float64) * 2
    idx = torch.arange(n)
    visible = attention.create(pattern_spec).visible(idx[:, None], idx[None, :])
    got = s.scores(q, k, idx, idx, visible=visible)
    want = cope_f64(q, k, s.pos_emb.detach(), visible)
    assert (got - want)[..., visible].abs().max() < 1e-10


def test_cope_at_init_scores_as_nope():
    s = positions.create("cope", n_heads=2, head_dim=8)
    assert s.values == {"max_pos": 16} and (s.pos_emb == 0).all() and s.per_layer and not s.separable
    q, k = torch.randn(1, 2, 10, 8), torch.randn(1, 2, 10, 8)
    nope = positions.create("none", n_heads=2, head_dim=8)
    causal = torch.ones(10, 10, dtype=torch.bool).tril()
    assert torch.equal(s.scores(q, k, torch.arange(10), torch.arange(10))[..., causal],
                       nope.scores(q, k, torch.arange(10), torch.arange(10))[..., causal])
    with pytest.raises(ValueError, match=">= 2"):
        positions.create("cope:max_pos=1", n_heads=2, head_dim=8)


def fox_pair(heads=3, head_dim=8, seed=3):
    """A FoX scheme and x-transformers' DataDependentAlibi with the same gate weights."""
    xt = xtransformers()
    torch.manual_seed(seed)
    ref = xt.DataDependentAlibi(heads * head_dim, heads)
    s = positions.create("fox", n_heads=heads, head_dim=head_dim)
    with torch.no_grad():
        s.weight.copy_(ref.to_forget_gates[0].weight)
        s.gate_bias.copy_(ref.to_forget_gates[0].bias)
    return s, ref


def test_fox_bias_equals_x_transformers_data_dependent_alibi():
    s, ref = fox_pair()
    x = torch.randn(2, 50, 24)
    want = ref(x)  # [b, H, n, n]: F_i - F_j
    rows = s.context(x)
    zeros = torch.zeros(2, 3, 50, 8)
    got = s.scores(zeros, zeros, torch.arange(50), torch.arange(50), context=(rows, rows))
    causal = torch.ones(50, 50, dtype=torch.bool).tril()
    assert (got - want)[..., causal].abs().max() < 1e-5
    assert (got[..., ~causal] == 0).all()  # keys after the query: bias 0 (every causal pattern masks them)


def test_fox_bias_is_the_sum_of_log_gates_between_key_and_query():
    s = positions.create("fox:bias_init=1.5", n_heads=2, head_dim=4).double()
    x = torch.randn(1, 12, 8, dtype=torch.float64)
    log_f = F.logsigmoid(x @ s.weight.detach().T + s.gate_bias.detach())  # [1, n, H]
    rows = s.context(x)
    assert (s.gate_bias == 1.5).all()
    zeros = torch.zeros(1, 2, 12, 4, dtype=torch.float64)
    got = s.scores(zeros, zeros, torch.arange(12), torch.arange(12), context=(rows, rows))
    for i in range(12):
        for j in range(i + 1):
            want = log_f[0, j + 1:i + 1].sum(0)  # Σ_{t=j+1..i}: [H]
            assert torch.allclose(got[0, :, i, j], want, atol=1e-12), (i, j)
    halves = s.context(x[:, 6:], previous=s.context(x[:, :6])[..., -1:, :])  # a cache's second piece
    assert torch.allclose(halves, rows[..., 6:, :], atol=1e-12)


def test_fox_without_an_input_is_alibi_with_slopes_softplus_of_minus_b():
    """The analytic view (no input: the gates of a zero input) is ALiBi of slope log(1 + e^-b_h)."""
    s = positions.create("fox", n_heads=2, head_dim=4).double()
    with torch.no_grad():
        s.gate_bias.copy_(torch.tensor([5.0, 0.5]))
    q = torch.zeros(1, 2, 7, 4, dtype=torch.float64)
    pos = torch.arange(7) + 100
    got = s.scores(q, q, pos, pos)
    dist = (pos[:, None] - pos[None, :]).clamp_min(0).double()
    slopes = torch.log1p(torch.exp(-torch.tensor([5.0, 0.5], dtype=torch.float64)))
    assert torch.allclose(got[0], -slopes[:, None, None] * dist, atol=1e-12)
