"""Position dropping (DroPE, lexkit.training.dropping): the step at which positions go, per layer as the
selector says, recorded in config.json, resumed to the same weights, and the run after training is
the model without positions on the dropped layers."""

import dataclasses
import json

import pytest
import torch
from safetensors.torch import load_file

from cli_checks import train_refused
from lexkit import GPT, ModelConfig
from lexkit.core.errors import RunError
from lexkit.data.corpus import Corpus
from lexkit.training import runs
from lexkit.training.dropping import carry, drop_step, schedule, sources
from lexkit.training.loop import make_optimizer, train
from lexkit.training.runs import configs_from_run
from lexkit.training.settings import configs
from stop import stop_at
from toy_corpus import DOCS

LAYOUT = "rope@window:8 ; rope@causal"


@pytest.fixture(scope="module")
def corpus():
    return Corpus("toy", DOCS[:-3], DOCS[-3:], {"source": "toy", "files": len(DOCS), "bytes": sum(map(len, DOCS))})


def tiny(**kw):
    """A tiny run of 8 steps, every step logged, checkpoints every 2."""
    return configs("tiny", "rope", **{"steps": 8, "save_every": 2, "eval_every": 8, "log_every": 1, "warmup": 2, **kw})


def losses(run):
    return {r["step"]: r["loss"] for r in runs.read_metrics(run)}


@pytest.fixture(scope="module")
def layered(tmp_path_factory, corpus):
    """The two-layer layout trained 8 steps with and without its global layer's RoPE dropped at 0.5 (step 4)."""
    root = tmp_path_factory.mktemp("drop")
    for name, kw in (("plain", {}), ("drop", {"drop_positions_at": 0.5, "drop_layers": "global"})):
        train(root / name, *tiny(layout=LAYOUT, **kw), progress=False, corpus=corpus)
    return root


def test_the_drop_step_is_ceil_of_the_fraction_as_written():
    assert drop_step(0.875, 40) == 35 and drop_step(0.1, 30) == 3 and drop_step(0.3, 10) == 3
    assert drop_step(0.5, 7) == 4  # 3.5 rounds up: from step index 4 on


def test_positions_go_at_step_d_on_the_selected_layer(layered):
    """Steps 0-3 are the same run as without the drop (the same losses); step index 4 is the first
    whose forward has no RoPE on the global layer."""
    plain, drop = losses(layered / "plain"), losses(layered / "drop")
    assert all(plain[s] == drop[s] for s in range(1, 5))  # the row of step s holds the loss of step index s-1
    assert all(plain[s] != drop[s] for s in range(6, 9)) and plain[5] != drop[5]
    config = json.loads((layered / "drop" / "config.json").read_text())
    assert config["model"]["layout"] == LAYOUT  # the model as configured
    assert config["train"]["drop_positions_at"] == 0.5 and config["train"]["drop_layers"] == "global"
    assert {k: config["drop"][k] for k in ("step", "layers")} == {"step": 4, "layers": [1]}
    assert config["drop"]["model"]["layout"] == "rope@window:8;none@causal"
    assert config["drop"]["resolved"] == ModelConfig(**config["drop"]["model"]).resolved()


def test_the_trained_run_is_the_model_without_positions_on_the_dropped_layer(layered):
    model, config = runs.load(layered / "drop")
    assert [m.name for m in model.layer_schemes] == ["rope", "none"]
    assert config["model"]["layout"] == "rope@window:8;none@causal" and runs.summary(layered / "drop")["layout"] == \
        "rope@window:8;none@causal"
    tokens = torch.randint(0, 256, (2, 48))
    nope = GPT(ModelConfig(**{**config["model"], "layout": "rope@window:8 ; none"})).eval()  # written independently
    nope.load_state_dict(model.state_dict())
    with_rope = GPT(ModelConfig(**{**config["model"], "layout": LAYOUT})).eval()
    with_rope.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert torch.equal(model(tokens), nope(tokens))
        assert not torch.allclose(model(tokens), with_rope(tokens), atol=1e-4)


@pytest.mark.parametrize("killed_at", [3, 5, 7])  # checkpoints of steps 2, 4 (= D) and 6 kept
def test_a_run_killed_and_resumed_around_the_drop_ends_with_the_same_weights(layered, tmp_path, corpus, monkeypatch,
                                                                             killed_at):
    """Killed before step index 3, 5 or 7 (no checkpoint of that step): resumed from the checkpoint
    of step 2 or 4, written by the model with RoPE (step index 4 is the first without), or of step
    6, the model after the drop; every weight and AdamW moment ends as in the uninterrupted run."""
    cfgs = tiny(layout=LAYOUT, drop_positions_at=0.5, drop_layers="global")
    restore = stop_at(monkeypatch, killed_at)
    with pytest.raises(KeyboardInterrupt):
        train(tmp_path / "cut", *cfgs, progress=False, corpus=corpus)
    restore()
    mid, _ = runs.load(tmp_path / "cut")  # a checkpoint before the drop is the model with RoPE
    assert [m.name for m in mid.layer_schemes] == (["rope", "rope"] if killed_at < 7 else ["rope", "none"])
    train(tmp_path / "cut", *cfgs, resume=True, progress=False, corpus=corpus)
    cut, whole = (folder / "model.safetensors" for folder in (tmp_path / "cut", layered / "drop"))
    assert cut.read_bytes() == whole.read_bytes()
    got, want = (load_file(str(d / "checkpoint.safetensors")) for d in (tmp_path / "cut", layered / "drop"))
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    assert losses(tmp_path / "cut") == losses(layered / "drop")


def test_a_uniform_model_dropped_everywhere_ends_as_nope(tmp_path, corpus):
    train(tmp_path / "run", *tiny(steps=4, drop_positions_at=0.75), progress=False, corpus=corpus)
    model, config = runs.load(tmp_path / "run")
    assert config["model"]["scheme"] == "none" and config["model"]["layout"] is None and model.uniform
    assert json.loads((tmp_path / "run" / "config.json").read_text())["drop"]["step"] == 3
    with pytest.raises(RunError, match="its positions drop at 0.75 of its 4 steps"):
        train(tmp_path / "run", *tiny(steps=6, drop_positions_at=0.75), resume=True, progress=False, corpus=corpus)
    model_cfg, train_cfg = configs_from_run(tmp_path / "run", steps=2)  # a fine-tune continues the NoPE model
    assert model_cfg.scheme == "none" and train_cfg.drop_positions_at is None


def test_scheme_parameters_follow_their_layer_when_a_drop_shifts_the_module_list():
    """Layers rope, rope, kerple-log: kerple's module is schemes.1 before and schemes.2 after L0 drops
    (a none module comes first); its slopes are carried from the one to the other."""
    cfg = ModelConfig(n_layers=3, d_model=32, n_heads=2, train_len=16, layout="rope ; rope ; kerple-log")
    train_cfg = configs("tiny", "rope", drop_positions_at=0.5, drop_layers="L0")[1]
    drop = schedule(cfg, train_cfg)
    old, new = GPT(cfg), GPT(drop.model)
    keys = sources(old, new)
    assert keys["schemes.2.p"] == "schemes.1.p" and set(keys) == set(new.state_dict())
    assert all(keys[k] == k for k in keys if not k.startswith("schemes."))
    # the weights and AdamW moments of a step taken before the drop, carried by name
    optimizer = make_optimizer(old, train_cfg)
    old(torch.randint(0, 256, (2, 16))).square().mean().backward()
    optimizer.step()
    new_optimizer = make_optimizer(new, train_cfg)
    carry(old, old.state_dict(), optimizer.state_dict(), [p for g in optimizer.param_groups for p in g["params"]],
          new, new_optimizer)
    before = dict(old.named_parameters())
    for name, p in new.named_parameters():
        a, b = optimizer.state[before[keys[name]]], new_optimizer.state[p]
        assert torch.equal(p, before[keys[name]]) and a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert len(new_optimizer.state) == len(optimizer.state) and new.num_params() == old.num_params()


@pytest.mark.parametrize("flags, words", [
    (["--drop-positions-at", "1.5"], "strictly between 0 and 1"),
    (["--drop-positions-at", "0"], "strictly between 0 and 1"),
    (["--drop-positions-at", "0.95"], "of 12 steps drops at step 12: no step would train without positions"),
    (["--drop-layers", "global"], "give --drop-positions-at F too"),
    (["--drop-positions-at", "0.5", "--drop-layers", "local"], "this model has no local layer"),
    (["--drop-positions-at", "0.5", "--drop-layers", "L7"], "the model has layers L0-1"),
    (["--drop-positions-at", "0.5", "--scheme", "none"], "have no positions to drop"),
    (["--drop-positions-at", "0.5", "--scheme", "learned", "--drop-layers", "L0"], "every layer's"),
])
def test_bad_drops_are_one_error_line_and_write_nothing(tmp_path, capsys, flags, words):
    assert words in train_refused(tmp_path, capsys, flags if "--scheme" in flags else ["--scheme", "rope", *flags])


def test_the_drop_is_a_settings_keyword():
    model_cfg, train_cfg = configs("tiny", "rope", layout=LAYOUT, drop_positions_at=0.875, drop_layers="global")
    drop = schedule(model_cfg, dataclasses.replace(train_cfg, steps=40))
    assert drop.step == 35 and drop.layers == (1,) and drop.model.layout == "rope@window:8;none@causal"
