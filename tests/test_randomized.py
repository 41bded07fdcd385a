"""Randomized positions (Ruoss et al. 2023): the sampled positions' distribution (a uniform
subset, sorted, in range), a training forward's positions against evaluation's, the kernels on
non-contiguous positions, and the option as the CLI and the run directory carry it."""

from __future__ import annotations

import json
import math

import pytest
import torch

import lexkit
from cli_checks import one_error_line
from lexkit import attention, positions
from lexkit.attention import Attention, choose_kernel
from lexkit.cli import main
from lexkit.positions.randomized import sample
from oracle import reference_attention
from toy_corpus import TINY, write_corpus


def test_sampled_positions_are_sorted_distinct_and_in_range():
    gen = torch.Generator().manual_seed(0)
    for n, top in [(1, 1), (16, 16), (16, 17), (100, 4096)]:
        pos = sample(n, top, gen)
        assert pos.dtype == torch.int64 and pos.shape == (n,)
        assert (pos[1:] > pos[:-1]).all() and int(pos[0]) >= 0 and int(pos[-1]) < top
    assert torch.equal(sample(16, 16), torch.arange(16))  # all of [0, L): the ordinary positions
    seeded = [sample(8, 100, torch.Generator().manual_seed(5)) for _ in range(2)]
    assert torch.equal(*seeded)
    with pytest.raises(ValueError, match="17 positions cannot be drawn from"):
        sample(17, 16)


def test_sampled_positions_are_a_uniform_subset():
    """Every position is included with probability n/L (binomial counts within 4.5 standard
    deviations over 4,000 draws), and the smallest position follows its exact law
    P(min = k) = C(L - 1 - k, n - 1) / C(L, n) (total variation below 0.03)."""
    n, top, draws = 8, 40, 4000
    gen = torch.Generator().manual_seed(1)
    picks = torch.stack([sample(n, top, gen) for _ in range(draws)])  # [draws, n]
    counts = torch.bincount(picks.flatten(), minlength=top).double()
    p = n / top
    z = (counts - draws * p) / math.sqrt(draws * p * (1 - p))
    assert z.abs().max() < 4.5, z
    law = torch.tensor([math.comb(top - 1 - k, n - 1) / math.comb(top, n) for k in range(top)], dtype=torch.float64)
    seen = torch.bincount(picks[:, 0], minlength=top).double() / draws
    assert abs(float(law.sum()) - 1) < 1e-12 and 0.5 * float((seen - law).abs().sum()) < 0.03


def test_a_training_forward_draws_positions_and_evaluation_counts_from_zero(monkeypatch):
    seen = []
    real = lexkit.model.gpt.Attention

    def spy(scheme, pattern, pos, **kw):
        seen.append((pos.clone(), kw["extent"]))
        return real(scheme, pattern, pos, **kw)

    monkeypatch.setattr(lexkit.model.gpt, "Attention", spy)
    cfg = lexkit.ModelConfig(scheme="alibi", n_layers=1, d_model=32, n_heads=2, train_len=16, random_positions=1000)
    model = lexkit.GPT(cfg)
    tokens = torch.randint(0, 256, (3, 16))
    torch.manual_seed(4)
    model.train()(tokens).sum().backward()
    model.eval()(tokens)
    (drawn, extent), (counted, _) = seen
    torch.manual_seed(4)
    assert torch.equal(drawn, sample(16, 1000)) and extent == int(drawn[-1] - drawn[0]) + 1 > 16
    assert torch.equal(counted, torch.arange(16))
    assert lexkit.GPT(lexkit.ModelConfig(scheme="learned", n_layers=1, d_model=32, n_heads=2, train_len=16,
                                         random_positions=1000)).scheme.table.shape[0] == 1000  # every position drawn


@pytest.mark.parametrize("spec", ["alibi", "rope", "fire", "t5"])
def test_kernels_agree_on_randomized_positions_with_gradients(spec):
    """Distances are differences of positions (up to ~4,000 here for 64 tokens) on dense and
    chunked, equal to the float64 reference, gradients too; flex refuses such input by name."""
    s = positions.create(spec, n_heads=2, head_dim=16, max_len=64)
    pattern = attention.create("causal")
    pos = sample(64, 4096, torch.Generator().manual_seed(2))
    base = tuple(torch.randn(1, 2, 64, 16) for _ in range(3))
    want = reference_attention(*(t.double() for t in base), s, pattern, pos)
    grads = {}
    for kernel in ("dense", "chunked"):
        q, k, v = (t.clone().requires_grad_(True) for t in base)
        out = Attention(s, pattern, pos, kernel=kernel, extent=int(pos[-1] - pos[0]) + 1)(q, k, v)
        assert (out.double() - want).abs().max() < 1e-5, kernel
        out.square().sum().backward()
        grads[kernel] = (q.grad, k.grad)
    assert all((a - b).abs().max() < 1e-4 for a, b in zip(grads["dense"], grads["chunked"]))
    with pytest.raises(ValueError, match="kernel 'flex' needs contiguous positions"):
        Attention(s, pattern, pos, kernel="flex", extent=int(pos[-1] - pos[0]) + 1)
    extent = int(pos[-1] - pos[0]) + 1
    assert choose_kernel("auto", s, pattern, 64, "cuda", True, False, extent=extent) == "dense"  # never flex


def test_cli_records_randomized_positions_and_refuses_them_below_the_training_length(tmp_path, capsys):
    data = write_corpus(tmp_path / "data")
    out = tmp_path / "run"
    assert main(["train", "--scheme", "rope", "--out", str(out), "--data", str(data), *TINY,
                 "--steps", "2", "--random-positions", "320"]) == 0
    assert json.loads((out / "config.json").read_text())["model"]["random_positions"] == 320
    capsys.readouterr()
    assert main(["runs", str(tmp_path)]) == 0
    assert "rope+random<320" in capsys.readouterr().out
    bad = tmp_path / "bad"
    assert main(["train", "--scheme", "rope", "--out", str(bad), "--data", str(data), *TINY,
                 "--random-positions", "16"]) == 2
    line = one_error_line(capsys)
    assert "random_positions=16 is below the training length 32" in line and not bad.exists()
    assert main(["train", "--scheme", "rope", "--out", str(bad), "--data", str(data), *TINY,
                 "--random-positions", "64", "--logn"]) == 2
    assert "random_positions and logn" in one_error_line(capsys) and not bad.exists()
