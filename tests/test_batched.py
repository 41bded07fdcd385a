"""Seeds trained as one batched model (lexkit.training.batched): the batched forward is each seed's own forward;
trained batched, each seed's losses and final weights equal its separate run's within float32
reduction-order noise, in an ordinary run directory every command reads; what cannot be batched is
refused by name before anything is written; table G's and the sweep's rows train batched when asked
(the tiny sweep test in test_sweep.py runs that path end to end)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from lexkit import GPT, ModelConfig
from lexkit.instruments.subject import load
from lexkit.training import batched, runs
from lexkit.training.loop import train
from lexkit.training.runs.weights import read_weights
from lexkit.training.settings import configs
from toy_corpus import STUDY_DOCS, write_corpus

#: after 4 steps at the tiny preset, each seed's weights and losses within this of its separate run's:
#: measured 1.2e-7 to 4.1e-7 after 20 steps and 0.4e-6 to 1.7e-6 after 100 (the batched products sum
#: in another order); the losses in metrics.jsonl are rounded to 6 decimals
WEIGHTS_TOLERANCE = 1e-5
LOSS_TOLERANCE = 2e-6


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("data"), STUDY_DOCS)


def seeds_of(model_cfg: ModelConfig, seeds=(0, 1, 2)) -> list[GPT]:
    out = []
    for seed in seeds:
        torch.manual_seed(seed)
        out.append(GPT(model_cfg).train())
    return out


@pytest.mark.parametrize("scheme, layout", [("rope", None), ("rope", "hwfa:W=8,shift=0.5"),
                                            ("rope", "none@causal+stickbreak"), ("alibi", None), ("xpos", None),
                                            ("rope", "rope@window:8;none@causal+entmax+kshift"),
                                            ("rope", "(rope@window:8;none@causal+selective)^2")])
def test_the_batched_forward_is_each_seeds_own_forward(scheme, layout):
    layers = 4 if layout and "^" in layout else 2  # a loop of two layers, run twice
    cfg = ModelConfig(scheme=scheme, n_layers=layers, d_model=32, n_heads=2, train_len=32, layout=layout)
    models = seeds_of(cfg)
    x = torch.randint(0, 257, (3, 2, 32), generator=torch.Generator().manual_seed(1))
    together = batched.batched_forward(models, x)  # [3, 2, 32, 257]
    for s, model in enumerate(models):
        torch.testing.assert_close(together[s], model(x[s]), rtol=0, atol=1e-5)
    assert batched.probe(models, cfg) == "auto"  # no state changed by the probe
    assert all(p.grad is None for m in models for p in m.parameters())


def test_a_learned_bias_trains_batched_on_the_kernel_that_computes_its_own_scores():
    """T5's table reaches the CPU's fused kernel as a mask, which has no gradient under vmap: the probe
    takes the chunked kernel, whose batched forward is again each seed's own."""
    cfg = ModelConfig(scheme="t5", n_layers=2, d_model=32, n_heads=2, train_len=32)
    models = seeds_of(cfg, (0, 1))
    assert batched.probe(models, cfg) == "chunked"
    x = torch.randint(0, 257, (2, 2, 32), generator=torch.Generator().manual_seed(2))
    together = batched.batched_forward(models, x, "chunked")
    torch.testing.assert_close(together[1], models[1](x[1]), rtol=0, atol=1e-5)


def test_a_forward_vmap_cannot_batch_is_refused_naming_the_layout():
    cfg = ModelConfig(scheme="rope", n_layers=1, d_model=32, n_heads=2, train_len=32)
    models = seeds_of(cfg, (0, 1))
    real = type(models[0]).forward
    models[0].forward = lambda tokens, **kw: real(models[0], tokens, **kw) * float(tokens.sum().item() > 0)
    with pytest.raises(batched.BatchRefused, match=r"layout 'rope': on the auto kernel its forward cannot run "
                                                   r"batched \(RuntimeError"):
        batched.probe(models, cfg)


@pytest.mark.parametrize("change, words", [
    ({"dropout": 0.1}, "dropout 0.1"),
    ({"random_positions": 64}, "random_positions 64"),
    ({"reset_unseen": 4}, "reset_unseen 4"),
    ({"drop_positions_at": 0.5, "layout": "rope@causal"}, "the position drop at 0.5"),
])
def test_what_cannot_be_batched_is_refused_by_name_and_nothing_is_written(tmp_path, data_dir, change, words):
    model_cfg, train_cfg = configs("tiny", "rope", steps=4, data=str(data_dir), **change)
    cfgs = [dataclasses.replace(train_cfg, seed=s) for s in (0, 1)]
    assert words in batched.refusal(model_cfg, cfgs)
    with pytest.raises(batched.BatchRefused, match=words):
        batched.train_seeds([tmp_path / "a", tmp_path / "b"], model_cfg, cfgs, progress=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_runs_that_differ_beyond_their_seed_or_repeat_one_are_not_batched():
    model_cfg, train_cfg = configs("tiny", "rope")
    assert batched.refusal(model_cfg, [train_cfg]) == "one seed: nothing to batch"
    assert "repeat" in batched.refusal(model_cfg, [train_cfg, train_cfg])
    other = dataclasses.replace(train_cfg, seed=1, lr=1e-4)
    assert batched.refusal(model_cfg, [train_cfg, other]) == "the runs differ in more than their seed"


def test_seeds_trained_batched_equal_their_separate_runs_and_read_as_any_run(tmp_path, data_dir):
    model_cfg, train_cfg = configs("tiny", "rope", steps=4, eval_every=4, save_every=4, log_every=2, data=str(data_dir),
                                   mix="induction:0.75", layout="hwfa:W=8", token_shift=0.25)
    cfgs = [dataclasses.replace(train_cfg, seed=s) for s in (0, 1)]
    for s, cfg in enumerate(cfgs):
        train(tmp_path / f"apart{s}", model_cfg, cfg, progress=False)
    summaries = batched.train_seeds([tmp_path / f"together{s}" for s in range(2)], model_cfg, cfgs, progress=False)
    assert [s["step"] for s in summaries] == [4, 4]
    for s in range(2):
        apart, together = tmp_path / f"apart{s}", tmp_path / f"together{s}"
        a, b = read_weights(apart, GPT(model_cfg)), read_weights(together, GPT(model_cfg))
        assert a.keys() == b.keys()
        assert max(float((a[k] - b[k]).abs().max()) for k in a) <= WEIGHTS_TOLERANCE
        rows_a, rows_b = runs.read_metrics(apart), runs.read_metrics(together)
        assert [r["step"] for r in rows_a] == [r["step"] for r in rows_b] == [2, 4]  # losses at 2 and 4, bpb at 4
        for key in ("loss", "val_bpb", "val_induction_bits"):
            assert all(abs(p[key] - q[key]) <= LOSS_TOLERANCE * 10 for p, q in zip(rows_a, rows_b) if key in p)
        assert all(r["batched_seeds"] == 2 for r in rows_b)
        config = json.loads((together / "config.json").read_text())
        assert config["batched"] == {"seeds": [0, 1], "kernel": "auto"} and config["train"]["seed"] == s
        assert load(together).config["model"] == load(apart).config["model"]  # it loads as any run
    # the seeds differ from each other: each kept its own initialisation and batches
    w0, w1 = read_weights(tmp_path / "together0", GPT(model_cfg)), read_weights(tmp_path / "together1", GPT(model_cfg))
    assert float((w0["embed.weight"] - w1["embed.weight"]).abs().max()) > 1e-3


def test_seeds_at_different_steps_are_trained_one_by_one_by_the_cache(tmp_path, data_dir):
    from lexkit.study.cache import Cache
    from lexkit.study.plan import Plan, StudyConfig
    from lexkit.training import distributed

    model_cfg, train_cfg = configs("tiny", "rope", steps=4, data=str(data_dir))
    cfgs = [dataclasses.replace(train_cfg, seed=s) for s in (0, 1)]
    dirs = [tmp_path / "s0", tmp_path / "s1"]
    train(dirs[0], model_cfg, dataclasses.replace(cfgs[0], steps=2), progress=False)  # seed 0 at step 2
    with pytest.raises(batched.BatchRefused, match=r"checkpoints are at different steps \(\[0, 2\]\)"):
        batched.train_seeds(dirs, model_cfg, cfgs, progress=False)
    plan = Plan(StudyConfig(preset="tiny", data=str(data_dir), extension=False, retrieval=False))
    cache = Cache(tmp_path, plan, distributed.SINGLE, progress=False)
    cells = [type("Cell", (), {"model_cfg": model_cfg, "train_cfg": c})() for c in cfgs]
    cache.trained_together(dirs, cells)
    assert [runs.trainer_state(d)["step"] for d in dirs] == [4, 4]
    assert [(e["name"], e["action"]) for e in cache.record] == [("s0", "ran"), ("s1", "ran")]
