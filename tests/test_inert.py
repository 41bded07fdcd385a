"""A modifier whose settings make it do nothing (issue 66 item 13): ``+topk:1000000000``, ``+chunks:1000``
and ``+chunks:8,n=1000`` on a model trained at 32 bytes trained the plain softmax without a word, and a sweep
arm written so trained no sparsity. Each modifier says at which lengths it does nothing
(:meth:`Modifier.inert_at`), checked here against the weights it computes; ``lexkit train`` warns and a
sweep refuses the arm (one check, :func:`lexkit.training.settings.inert_modifier`) where it does nothing at the
training length and at the longest length evaluated."""

from __future__ import annotations

import json
import math

import pytest
import torch

from lexkit.attention import modifiers as mods
from lexkit.cli import main
from lexkit.training.settings import configs, inert_modifier
from toy_corpus import STUDY_DOCS, write_corpus


def _rows(n: int, seed: int = 0):
    """Causal scores [1, 2, n, n] with distinct values (no ties), their mask and indices."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(1, 2, n, n, generator=g, dtype=torch.float64)
    visible = torch.ones(n, n, dtype=torch.bool).tril()
    idx = torch.arange(n)
    return z.masked_fill(~visible, float("-inf")), visible, idx


def _softmax(z):
    return torch.softmax(z.float(), dim=-1)


@pytest.mark.parametrize("n", [1, 5, 8, 9])
@pytest.mark.parametrize("k", [1, 4, 8, 9])
def test_topk_is_inert_exactly_where_its_weights_are_the_softmax(n, k):
    """K >= n (a query sees at most n keys) is the plain softmax; K < n drops a key of the last row."""
    modifier = mods.parse(f"topk:{k}")
    z, visible, idx = _rows(n)
    same = torch.equal(modifier.weights(None)(z, visible, idx, idx), _softmax(z))
    assert (modifier.inert_at(n) is not None) == same == (k >= n)


@pytest.mark.parametrize("n", [1, 8, 9, 24, 32])
@pytest.mark.parametrize("spec, size, chunks", [("chunks:8,n=1", 8, 1), ("chunks:8,n=3", 8, 3),
                                                ("chunks:1000", 1000, 4), ("chunks:4,n=1000", 4, 1000)])
def test_chunks_are_inert_exactly_where_every_query_attends_inside_every_chunk(n, spec, size, chunks):
    """ceil(n / C) chunks, a query attends inside its own and n - 1 past ones: inert iff ceil(n / C) <= n,
    and then the weights are the softmax's; else some query of the last chunk leaves a past chunk out."""
    modifier = mods.parse(spec)
    z, visible, idx = _rows(n)
    same = torch.allclose(modifier.weights(None)(z, visible, idx, idx), _softmax(z), atol=0, rtol=1e-6)
    assert (modifier.inert_at(n) is not None) == same == (math.ceil(n / size) <= chunks)


@pytest.mark.parametrize("spec, inert_up_to", [("logn:L=64", 64), ("fitted:L=64", 64), ("llama4:floor=64", 63)])
def test_a_temperature_is_inert_where_its_factor_is_one_at_every_position(spec, inert_up_to):
    modifier = mods.parse(spec)
    for n in (inert_up_to - 1, inert_up_to, inert_up_to + 1):
        factor = modifier.query_scale(None, torch.arange(n))
        assert (modifier.inert_at(n) is not None) == bool((factor == 1).all()) == (n <= inert_up_to)


@pytest.mark.parametrize("spec", ["entmax", "selective", "softcap:30", "sit", "shift"])
def test_a_modifier_that_cannot_say_is_taken_to_act(spec):
    assert mods.parse(spec, 32).inert_at(32) is None and mods.parse(spec, 32).inert_at(1) is None


@pytest.mark.parametrize("layout, what", [
    ("rope+topk:1000000000", "+topk:1000000000 does nothing at the training length 32 nor at 512"),
    ("rope+chunks:1000", "+chunks:1000 does nothing at the training length 32 nor at 512"),
    ("rope+chunks:8,n=1000", "+chunks:8,n=1000 does nothing"),
    ("rope@window:16;none+logn:L=100000", "layer 1 (none@causal+logn:L=100000): +logn:L=100000 does nothing"),
])
def test_the_check_names_the_modifier_that_does_nothing_at_both_lengths(layout, what):
    cfg, _ = configs("tiny", layout=layout)
    assert inert_modifier(cfg, 16 * 32).startswith(what)


@pytest.mark.parametrize("layout", ["rope+topk:4", "rope+topk:32", "rope+chunks:8", "rope+chunks:8,n=4",
                                    "rope@window:16;none+logn", "hwfa"])
def test_a_modifier_that_acts_at_either_length_passes(layout):
    """topk:32 and chunks:8,n=4 are the plain softmax at the training length 32 but act at 512; log-n at
    the training length (its default L) acts past it."""
    cfg, _ = configs("tiny", layout=layout)
    assert inert_modifier(cfg, 16 * 32) is None


def _trainer(monkeypatch):
    """lexkit train up to the trainer, which is stubbed (the check comes before any training)."""
    seen = []
    monkeypatch.setattr("lexkit.cli.train.train", lambda out, model_cfg, *a, **k: seen.append(model_cfg) or {})
    return seen


@pytest.mark.parametrize("layout", ["rope+topk:1000000000", "rope+chunks:1000", "rope+chunks:8,n=1000"])
def test_lexkit_train_warns_of_a_modifier_that_does_nothing(tmp_path, capsys, monkeypatch, layout):
    seen = _trainer(monkeypatch)
    assert main(["train", "--preset", "tiny", "--layout", layout, "--out", str(tmp_path / "r"), "--threads", "1",
                 "--no-progress"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(seen) == 1 and len(err) == 1, err
    modifier = layout.split("+", 1)[1]
    assert err[0].startswith(f"warning: +{modifier} does nothing at the training length 32 nor at 512, the longest "
                             "evaluated ("), err


def test_lexkit_train_is_silent_where_the_modifier_acts(tmp_path, capsys, monkeypatch):
    seen = _trainer(monkeypatch)
    assert main(["train", "--preset", "tiny", "--layout", "rope+topk:4", "--out", str(tmp_path / "r"), "--threads",
                 "1", "--no-progress"]) == 0
    assert len(seen) == 1 and capsys.readouterr().err == ""


@pytest.mark.parametrize("layout", ["rope+topk:1000000000", "rope+chunks:8,n=1000"])
def test_a_sweep_refuses_an_arm_whose_modifier_does_nothing_before_any_work(tmp_path, capsys, layout):
    data = write_corpus(tmp_path / "data", STUDY_DOCS)
    config = tmp_path / "sweep.json"
    arms = [{"label": "plain"}, {"label": "sparse", "layout": layout}]
    config.write_text(json.dumps({"name": "tiny", "preset": "tiny", "steps": 3, "seeds": 1, "samples": 1,
                                  "eval_docs": 2, "data": str(data), "arms": arms}))
    for dry in ([], ["--dry-run"]):
        assert main(["sweep", str(config), "--out", str(tmp_path / "out"), "--threads", "1", *dry]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        modifier = layout.split("+", 1)[1]
        assert len(err) == 1 and err[0].startswith(f"error: arm 'sparse': +{modifier} does nothing at the training "
                                                   "length 32 nor at 512"), err
        assert not (tmp_path / "out").exists()
