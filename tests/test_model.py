"""The byte-level decoder: position offsets, order, training steps, kernels at model level."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kit import rel, tiny_gpt
from lexkit import BOS, GPT, VOCAB, ModelConfig
from lexkit.attention import Pattern, kernels
from schemes_under_test import RELATIVE, TEN


def tiny(spec: str, **kw) -> GPT:
    """The kit's model at 64 positions, from the test's random state; T5's learned bias, initialised
    near 0, would hardly show: spread."""
    return tiny_gpt(spec, **{"train_len": 64, **kw}, seed=None, spread=spec == "t5")


def tokens(b: int, n: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    t = torch.randint(0, 256, (b, n), generator=gen)
    t[:, 0] = BOS
    return t


class Full(Pattern):
    """Every key visible (no causal mask): a control, never registered."""

    name = "full-control"

    def visible(self, q_idx, k_idx):
        return torch.ones_like(q_idx - k_idx, dtype=torch.bool)


# -- config ----------------------------------------------------------------------------------------
def test_config_and_shapes():
    assert VOCAB == 257 and BOS == 256
    model = tiny("rope")
    out = model(tokens(3, 10))
    assert out.shape == (3, 10, 257) and torch.isfinite(out).all()
    assert ModelConfig(scheme="xpos:gamma=0.4").scheme == "xpos"  # canonical spec
    for bad in (dict(d_model=30, n_heads=4), dict(n_layers=0), dict(dropout=1.0), dict(scheme="nope")):
        with pytest.raises(ValueError):
            ModelConfig(**bad)
    # learned's table defaults to the training length, max_len overrides it
    assert tiny("learned").scheme.table.shape[0] == 64
    assert tiny("learned", max_len=100).scheme.table.shape[0] == 100


def test_one_scheme_module_shared_by_all_layers():
    model = tiny("kerple-log", n_layers=3)
    names = [n for n, _ in model.named_parameters() if n.startswith("scheme.")]
    assert sorted(names) == ["scheme.a", "scheme.p"]


# -- offset: translation invariance ----------------------------------------------------------------
@pytest.mark.parametrize("spec", RELATIVE)
def test_relative_schemes_are_invariant_to_offset(spec):
    model = tiny(spec)
    x = tokens(2, 40)
    with torch.no_grad():
        base = model(x)
        for offset in (1, 333, 10_000):
            assert rel(model(x, offset=offset), base) <= 1e-4, (spec, offset)


@pytest.mark.parametrize("spec", ["sinusoidal", "learned"])
def test_absolute_schemes_are_not_invariant_to_offset(spec):
    model = tiny(spec)  # learned: table of 64 positions
    x = tokens(2, 16)
    with torch.no_grad():
        base = model(x)
        moved = model(x, offset=40)
        again = model(x, offset=0)
    assert torch.equal(again, base)  # deterministic, so the difference below is the offset's
    assert rel(moved, base) > 1e-2, spec


def test_learned_past_its_table_raises():
    model = tiny("learned")  # 64 positions
    with pytest.raises(ValueError, match="position 64 is past the table"):
        model(tokens(1, 65))
    with pytest.raises(ValueError, match="position 69 is past the table"):
        model(tokens(1, 10), offset=60)
    model(tokens(1, 10), offset=54)  # the last position, 63, is fine


# -- order ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", TEN)
def test_permuting_tokens_changes_outputs(spec):
    """A model blind to order would give model(x[perm]) == model(x)[perm] (permutation
    equivariance). Every scheme, NoPE included (its order comes from the causal mask), breaks it."""
    model = tiny(spec)
    x = tokens(2, 24, seed=1)
    perm = torch.randperm(24, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        y = model(x)
        y_perm = model(x[:, perm])
    assert rel(y_perm, y[:, perm]) > 1e-3, spec


def test_nope_without_causal_mask_is_blind_to_order():
    """The control for the test above: the same comparison is ~0 when nothing carries order."""
    model = tiny("none")
    x = tokens(2, 24, seed=1)
    perm = torch.randperm(24, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        y = model(x, pattern=Full())
        y_perm = model(x[:, perm], pattern=Full())
    assert rel(y_perm, y[:, perm]) < 1e-5


# -- training ------------------------------------------------------------------------------------
LEARNABLE = {"learned": ["scheme.table"], "kerple-power": ["scheme.a", "scheme.p"],
             "kerple-log": ["scheme.a", "scheme.p"], "t5": ["scheme.table"]}


@pytest.mark.parametrize("spec", TEN)
def test_one_training_step_on_the_cpu_path(spec, monkeypatch):
    model = tiny(spec, dropout=0.1).train()
    calls = []
    dense = kernels.dense.attend
    monkeypatch.setattr(kernels.dense, "attend", lambda att, *a: calls.append(att.kernel) or dense(att, *a))
    x = tokens(2, 65, seed=3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    logits = model(x[:, :-1])  # kernel auto
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))
    assert torch.isfinite(loss)
    assert loss.item() == pytest.approx(torch.log(torch.tensor(257.0)).item(), abs=0.5)  # near uniform at init
    loss.backward()
    assert calls == ["dense"] * model.cfg.n_layers  # auto picked dense SDPA: it has a backward on CPU
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
    for name in LEARNABLE.get(spec, []):
        grad = dict(model.named_parameters())[name].grad
        assert grad.abs().sum() > 0, name
    if spec == "learned":  # every one of the 64 positions was used, so every row learns
        assert (model.scheme.table.grad.abs().sum(-1) > 0).all()
    opt.step()
    model.scheme.constrain_()  # what the training loop does after each step
    with torch.no_grad():
        loss2 = F.cross_entropy(model(x[:, :-1]).reshape(-1, VOCAB), x[:, 1:].reshape(-1))
    assert torch.isfinite(loss2) and loss2 != loss


@pytest.mark.parametrize("spec", TEN)
def test_chunked_equals_dense_through_the_model_with_gradients(spec, monkeypatch):
    """150 tokens: three query chunks (of 64 here, 256 by default). Outputs and the gradient of every
    parameter agree."""
    monkeypatch.setattr(kernels.step, "CHUNK", 64)
    model = tiny(spec, max_len=1024).train()
    x = tokens(1, 150, seed=4)
    grads = {}
    outs = {}
    for kernel in ("dense", "chunked"):
        model.zero_grad()
        out = model(x, kernel=kernel)
        (out.float() ** 2).mean().backward()
        outs[kernel] = out.detach()
        grads[kernel] = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    assert rel(outs["chunked"], outs["dense"]) <= 1e-4
    assert grads["dense"].keys() == grads["chunked"].keys() == dict(model.named_parameters()).keys()
    for name, g in grads["dense"].items():
        if g.abs().max() > 0:
            assert rel(grads["chunked"][name], g) <= 1e-3, (spec, name)
        else:
            assert grads["chunked"][name].abs().max() == 0, (spec, name)


def test_hook_observes_every_layer_through_the_chunked_kernel():
    model = tiny("alibi", n_layers=3)
    seen = []
    x = tokens(1, 40)
    with torch.no_grad():
        out = model(x, hook=lambda layer, qi, ki, s, p: seen.append((layer, s.shape)))
        assert rel(out, model(x)) <= 1e-4
    assert [layer for layer, _ in seen] == [0, 1, 2]
    assert all(shape == (1, 2, 40, 40) for _, shape in seen)
