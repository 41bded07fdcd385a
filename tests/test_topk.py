"""Top-k attention (``+topk:K``, lexkit.attention.modifiers.topk): its weights are x-transformers'
``sparse_topk_attn`` on the same scores, the straight-through gradient included; ties at the K-th score
are all kept; K at least the row is the softmax; on a model, dense == chunked == the KV cache ==
cached generation, and it trains; flex and a sink are refused by name."""

from __future__ import annotations

import pytest
import torch

from kit import assert_kernels_and_cache_agree, assert_trains, sharp_gpt
from lexkit import GPT, ModelConfig, layouts
from lexkit.attention import kernels
from lexkit.attention.modifiers import top_k_weights


def causal_scores(n: int = 12, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(2, 3, n, n, generator=gen, dtype=torch.float64)
    idx = torch.arange(n)
    visible = idx[None, :] <= idx[:, None]
    return z.masked_fill(~visible, float("-inf")), visible, idx


@pytest.mark.parametrize("k", [1, 3, 12])
def test_the_weights_are_x_transformers_sparse_topk_on_the_same_scores(k):
    attend = pytest.importorskip("x_transformers.attend")
    z, visible, idx = causal_scores()
    ours = top_k_weights(z, visible, idx, idx, k)
    theirs = attend.sparse_topk_attn(z.float().masked_fill(~visible, -torch.finfo(torch.float32).max), k)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    kept = (ours > 0).sum(-1)  # each query keeps min(K, its visible keys)
    assert torch.equal(kept, torch.minimum(torch.tensor(k), idx + 1).expand_as(kept))


def test_straight_through_is_the_top_k_forward_with_the_dense_gradient():
    attend = pytest.importorskip("x_transformers.attend")
    z, visible, idx = causal_scores()
    mask = -torch.finfo(torch.float32).max
    ours_in = z.float().clone().requires_grad_()
    theirs_in = z.float().masked_fill(~visible, mask).clone().requires_grad_()
    weights = torch.randn(z.shape, generator=torch.Generator().manual_seed(3))
    ours = top_k_weights(ours_in, visible, idx, idx, 3, straight=True)
    theirs = attend.sparse_topk_attn(theirs_in, 3, straight_through=True)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    (ours * weights).sum().backward()
    (theirs * weights).sum().backward()
    torch.testing.assert_close(ours_in.grad.masked_fill(~visible, 0), theirs_in.grad.masked_fill(~visible, 0),
                               rtol=0, atol=1e-6)
    plain_in = z.float().clone().requires_grad_()
    (top_k_weights(plain_in, visible, idx, idx, 3) * weights).sum().backward()
    outside = visible & (ours.detach() == 0)  # visible keys outside the top 3: a gradient only straight-through
    assert bool((plain_in.grad[..., outside] == 0).all()) and bool((ours_in.grad[..., outside] != 0).any())


def test_ties_at_the_kth_score_are_all_kept_and_k_past_the_row_is_the_softmax():
    z = torch.tensor([[[[1.0, 2.0, 2.0, 2.0, 0.5]]]])
    visible = torch.ones(1, 5, dtype=torch.bool)
    idx = torch.arange(5)
    w = top_k_weights(z, visible, torch.tensor([4]), idx, 2)
    assert torch.equal(w > 0, torch.tensor([[[[False, True, True, True, False]]]]))  # three tied at the 2nd
    torch.testing.assert_close(w[0, 0, 0, 1:4], torch.full((3,), 1 / 3))
    z, visible, idx = causal_scores(8)
    torch.testing.assert_close(top_k_weights(z, visible, idx, idx, 50), torch.softmax(z.float(), -1))


@pytest.mark.parametrize("layout", ["rope@window:6;none@causal+topk:3", "none@causal+logn+topk:2,straight=true",
                                    "rope@window:5+topk:2;none@causal"])
def test_dense_chunked_the_cache_and_cached_generation_agree(layout, monkeypatch):
    monkeypatch.setattr(kernels.step, "CHUNK", 8)  # several query blocks in 40 tokens
    plain = sharp_gpt(layout.replace("+topk:3", "").replace("+topk:2,straight=true", "").replace("+topk:2", ""), 8)
    assert_kernels_and_cache_agree(sharp_gpt(layout, 8), plain)


def test_a_top_k_layer_trains_and_flex_and_a_sink_are_refused_by_name():
    assert_trains(sharp_gpt("rope@window:6;none@causal+topk:2,straight=true", 8))
    from lexkit.attention.modifiers import TopK

    assert "top-k attention" in TopK.flex_refusal and "kernel 'flex'" in TopK.flex_refusal
    with pytest.raises(ValueError, match="cannot share a layer"):
        layouts.parse("none@causal+topk:4+sink", n_layers=1, train_len=16)
    with pytest.raises(ValueError, match="two attentions|one attention|cannot share"):
        layouts.parse("none@causal+topk:4+stickbreak", n_layers=1, train_len=16)
    with pytest.raises(ValueError, match="K=0"):
        layouts.parse("none@causal+topk:0", n_layers=1, train_len=16)


# -- at evaluation, on a trained run: --add -----------------------------------------------------------
def test_a_run_evaluated_with_top_k_added_is_the_model_with_top_k_on_the_trained_weights(trained):
    """``lexkit.load(run, add="global=topk:2")`` builds the run's layers with the modifier on the
    selected ones and loads the same tensors (no retraining); the numbers are that model's."""
    import lexkit
    from lexkit.training.runs import read_config

    base = lexkit.load(str(trained / "alibi"))
    added = lexkit.load(str(trained / "alibi"), add="topk:2")
    assert [layer.spec for layer in added.model.stack] == [f"{layer.spec}+topk:2" for layer in base.model.stack]
    assert added.config["trained"] == read_config(trained / "alibi")["model"]
    rebuilt = GPT(ModelConfig(**added.config["model"])).eval()
    rebuilt.load_state_dict(base.model.state_dict())
    x = torch.randint(0, 256, (1, 40), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        torch.testing.assert_close(added.model(x), rebuilt(x), rtol=0, atol=0)
        assert (added.model(x) - base.model(x)).abs().max() > 1e-4


@pytest.mark.parametrize("argv, words", [
    (["--add", "sink"], "sink has learned state, which the run did not train"),
    (["--add", "L9=topk:2"], "layer selector 'L9'"),
    (["--add", "topk:2+stickbreak"], "topk"),
    (["--add", "topk:0"], "K=0"),
])
def test_what_cannot_be_added_at_evaluation_is_one_line(trained, capsys, tmp_path, argv, words):
    from lexkit.cli import main

    out = tmp_path / "e.json"
    assert main(["eval", str(trained / "alibi"), "--max-docs", "1", "--json", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and words in err[0] and not out.exists()


def test_an_hf_model_refuses_an_added_modifier_by_name():
    from lexkit.instruments.subject import HFSubject

    with pytest.raises(ValueError, match="--add is for lexkit runs"):
        HFSubject.refuse(add="global=topk:2")


def test_the_needle_mass_instrument_measures_a_run_with_top_k_added(trained, capsys):
    """``lexkit inspect --needle-mass --add topk:1``: the instrument sees the top-k weights (one key a
    query at K = 1: its top key holds all the mass); the byte table refuses --add."""
    from lexkit.cli import main
    from lexkit.instruments.inspect.needle_mass.measure import needle_mass_run

    report = needle_mass_run(str(trained / "alibi"), "copy", lengths=[64], depths=[50], samples=2,
                                         add="topk:1")
    assert report["layout"] == "(alibi@causal+topk:1)x2" and "scheme" not in report  # the layers that ran
    rows = report["rows"]  # every head of every layer puts all its mass on one key: entropy 0
    assert rows and all(max(r["entropy_per_head"]) < 1e-4 and r.get("weights") in (None, "softmax") for r in rows)
    plain = needle_mass_run(str(trained / "alibi"), "copy", lengths=[64], depths=[50], samples=2)
    assert max(max(r["entropy_per_head"]) for r in plain["rows"]) > 0.1
    assert main(["inspect", str(trained / "alibi"), "--add", "topk:2"]) == 2
    assert "--add applies to --needle-mass" in capsys.readouterr().err
