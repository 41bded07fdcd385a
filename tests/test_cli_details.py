"""The smaller things issue 66 (item 14) found misleading, each as it reads now: a layout longer than the model
asks for the model's layers (the README's loop example fails on 2-layer presets without ``--layers 4``); the
"adding one" example of docs/instruments.md runs without a warning; a count of one is singular; ``lexkit
train`` takes ``--no-progress``; ``--add``'s error names two modifiers in the order the layer writes them; a
sweep arm with ``"mix": ""`` is not called a mix; the study's estimate times a step's batch as the trainer
draws it."""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from pathlib import Path

import pytest

from cli_checks import one_error_line
from lexkit.cli import build_parser, main
from lexkit.layouts import LayoutError
from lexkit.training import presets
from lexkit.training.settings import configs

ROOT = Path(__file__).resolve().parent.parent


# -- (a) a layout of k layers on a model of n asks for k layers --------------------------------------------------
@pytest.mark.parametrize("layout, k, n", [("(rope@window:16 ; none@causal)^2", 4, 2), ("rope;none;rope", 3, 2),
                                          ("rope;none;rope;none", 4, 6)])
def test_a_layout_longer_than_the_model_asks_for_as_many_layers_as_it_has(layout, k, n):
    """It said "has 4 layers and the model 2: give 2 layers" (the README's loop example on tiny and quick)."""
    with pytest.raises(LayoutError) as exc:
        configs("tiny", layout=layout, n_layers=n)
    assert f"has {k} layers and the model {n}: give the model {k} layers (--layers {k};" in str(exc.value)


def test_the_readmes_loop_example_builds_with_its_layers_on_every_preset():
    (layout, layers), = re.findall(r'--layout "(\([^"]*\)\^\d)"\s+--layers (\d+)', (ROOT / "README.md").read_text())
    for preset in presets.PRESETS:
        model_cfg, _ = configs(preset, layout=layout, n_layers=int(layers))
        assert len(model_cfg.stack) == int(layers) and model_cfg.stack.looped


# -- (b) docs/instruments.md's example runs clean; a warning of several lines is one line --------------------------
def test_the_instruments_doc_example_runs_as_written_without_a_warning(trained, tmp_path, capsys, monkeypatch):
    """It warned on every run: float() of a parameter that requires grad (torch's warning, two lines, printed
    with a literal \\n)."""
    from lexkit.instruments import base

    text = (ROOT / "docs" / "instruments.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", text[text.index("## Adding one"):], flags=re.S)[:1]
    (tmp_path / "doc_toy_instrument.py").write_text(block)
    import lexkit.cli.inspect  # noqa: F401 (lexkit's own instruments registered before the registry is copied)

    # without the fixtures' toy of the same name (tests/test_instruments.py's import registers it for good)
    monkeypatch.setattr(base.INSTRUMENTS, "_classes", {name: cls for name, cls in base.INSTRUMENTS._classes.items()
                                                       if name != "toy-norms"})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "doc_toy_instrument", raising=False)
    assert main(["--import", "doc_toy_instrument", "toy-norms", str(trained / "rope"), "--top", "2"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and len(captured.out.strip().splitlines()) == 2
    sys.modules.pop("doc_toy_instrument", None)


def test_a_warning_of_several_lines_is_one_line_without_an_escaped_newline(capsys):
    from lexkit.cli import _warning_line

    _warning_line("Converting a tensor may lead to unexpected behavior.\nConsider using tensor.detach() first.",
                  UserWarning, "x.py", 1)
    assert capsys.readouterr().err == ("warning: Converting a tensor may lead to unexpected behavior. Consider using "
                                       "tensor.detach() first.\n")


# -- (c) one is singular ---------------------------------------------------------------------------------------
def test_a_corpus_of_one_document_says_document(tmp_path):
    from lexkit.data.corpus import load_corpus

    (tmp_path / "a.txt").write_text("hello world " * 100)
    assert load_corpus(str(tmp_path)).describe().startswith(f"{tmp_path}: 1 document, 1,200 bytes")


# -- (d) lexkit train takes --no-progress ----------------------------------------------------------------------
def test_lexkit_train_takes_no_progress_as_the_other_commands_do():
    base = ["train", "--scheme", "rope", "--out", "unused"]
    assert build_parser("train").parse_args(base + ["--no-progress"]).quiet
    assert build_parser("train").parse_args(base + ["--quiet"]).quiet
    assert not build_parser("train").parse_args(base).quiet


# -- (e) --add's error names the modifiers in the layer's order -------------------------------------------------
def test_an_added_modifier_that_a_layer_refuses_is_named_in_the_layers_order(capsys, monkeypatch):
    """gpt-oss's layers hold +sink; --add topk:4 said "'...+sink+topk:4': +topk and +sink cannot share a layer"."""
    from lexkit.model.gpt import ModelConfig
    from lexkit.training.runs.config import evaluation_overrides

    cfg, _ = configs("tiny", layout="gpt-oss")
    added = evaluation_overrides(dataclasses.asdict(cfg), None, None, "topk:4")
    with pytest.raises(LayoutError) as exc:
        ModelConfig(**{**dataclasses.asdict(cfg), **added})
    message = str(exc.value)
    assert "+sink+topk:4'): +sink and +topk cannot share a layer: top-k replaces the softmax" in message, message


def test_two_modifiers_written_in_a_layout_are_named_as_written():
    for layout, words in (("rope+topk:4+sink", "+topk and +sink cannot"),
                          ("rope+sink+topk:4", "+sink and +topk cannot")):
        with pytest.raises(LayoutError, match=re.escape(words)):
            configs("tiny", layout=layout)


# -- (f) an arm's "mix": "" is no mix in the dry run's line and its run's name -----------------------------------
def test_an_arm_without_a_mix_is_not_called_a_mix(tmp_path):
    """Its dry-run line read "plain + mix, seed 0" and its run directory mix-rope-s0-..."""
    from lexkit.study.sweep import Sweep, parse
    from toy_corpus import STUDY_DOCS, write_corpus

    data = write_corpus(tmp_path / "data", STUDY_DOCS)
    cfg = parse({"name": "tiny", "preset": "tiny", "steps": 3, "seeds": 1, "samples": 1, "eval_docs": 2,
                 "data": str(data), "mix": "induction:0.75", "arms": [{"label": "plain", "mix": ""}, {"label": "m"}]})
    sweep = Sweep(cfg, tmp_path / "out", progress=False, echo=None)
    trains = {u.label: u.info["run"] for u in sweep.units() if u.job == "train"}
    assert sorted(trains) == ["m + mix, seed 0", "plain, no mix, seed 0"]
    assert trains["plain, no mix, seed 0"].startswith("nomix-rope-s0-")
    assert trains["m + mix, seed 0"].startswith("mix-rope-s0-")


# -- (g) the estimate's step draws its batch as the trainer does -------------------------------------------------
@pytest.mark.parametrize("mix", ["induction:0.75", ""])
def test_the_timed_step_includes_drawing_its_batch(monkeypatch, mix):
    """The trainer writes its mix's task documents for every batch (about a tenth of a table G step on one
    thread); the estimate timed the step on one fixed random batch, and make study's first ETA read 18 % low."""
    import torch

    from lexkit.data.corpus import Stream
    from lexkit.data.mix import MixedStream
    from lexkit.study.estimate import timed_steps

    drawn, pause = [], 0.02
    cls = MixedStream if mix else Stream
    real = cls.batch

    def slow(self, step, batch, length, seed, rows=slice(None)):
        drawn.append((type(self).__name__, step, batch, length))
        time.sleep(pause)
        return real(self, step, batch, length, seed, rows)

    monkeypatch.setattr(cls, "batch", slow)
    model_cfg, train_cfg = configs("tiny", "rope", mix=mix or None, batch=2)
    seconds = timed_steps(model_cfg, train_cfg, torch.device("cpu"))
    assert drawn == [(cls.__name__, step, 2, 32) for step in range(6)] and seconds >= pause


def test_a_train_command_with_a_bad_layer_count_is_one_line(tmp_path, capsys):
    assert main(["train", "--preset", "tiny", "--layout", "(rope@window:16 ; none@causal)^2", "--out",
                 str(tmp_path / "r"), "--threads", "1"]) == 2
    assert "give the model 4 layers (--layers 4;" in one_error_line(capsys)
