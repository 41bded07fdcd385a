"""What a layered run used to ignore or change silently: each flag is honoured, refused by name, or
pinned (one test per misleading case)."""

from __future__ import annotations

import json

import pytest
import torch

from cli_checks import one_error_line
from lexkit import layouts
from lexkit.attention.modifiers import logn_scale
from lexkit.cli import main
from lexkit.model.gpt import ModelConfig
from lexkit.training.runs import configs_from_run
from lexkit.training.runs.config import scheme_overrides
from toy_corpus import write_corpus

FAST = ["--preset", "tiny", "--steps", "2", "--quiet", "--threads", "1"]


@pytest.fixture(scope="module")
def layered(tmp_path_factory):
    """A tiny HWFA run (2 steps at 32 bytes) and its corpus."""
    root = tmp_path_factory.mktemp("layered")
    data = write_corpus(root / "data")
    out = root / "hwfa"
    assert main(["train", "--layout", "hwfa:W=8", "--out", str(out), "--data", str(data), *FAST]) == 0
    return out, data


def test_an_unqualified_scheme_that_changes_no_layer_is_refused():
    section = {"scheme": "rope", "layout": "hwfa:W=8", "n_layers": 2, "d_model": 32, "n_heads": 2, "train_len": 32}
    with pytest.raises(ValueError, match="--scheme none changes no layer.*L1.*local=none"):
        scheme_overrides(section, "none")
    assert scheme_overrides(section, "local=none")["layout"] == "none@window:8;none@causal+logn:L=32"


def test_an_unqualified_scheme_that_changes_no_layer_is_refused_by_eval(layered, capsys):
    out, _ = layered
    assert main(["eval", str(out), "--lengths", "32", "--scheme", "none"]) == 2
    assert "changes no layer" in one_error_line(capsys)


@pytest.mark.parametrize("kwargs, words", [
    ({"token_shift": 0.01}, ["--token-shift 0.01", "0 features at width 32"]),
    ({"layout": "rope@window:8+shift:0.01;none"}, ["layer 0", "+shift: 0.01", "width 32"]),
])
def test_a_token_shift_narrower_than_one_feature_is_refused_naming_the_width(kwargs, words):
    with pytest.raises(ValueError) as info:
        ModelConfig(n_layers=2, d_model=32, n_heads=2, train_len=32, **kwargs)
    assert all(w in str(info.value) for w in words), str(info.value)
    assert ModelConfig(n_layers=2, d_model=32, n_heads=2, train_len=32, token_shift=1 / 32).stack  # one feature


def test_a_narrow_token_shift_on_the_command_line_writes_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--scheme", "rope", "--token-shift", "0.01", "--out", str(out),
            "--data", str(write_corpus(tmp_path / "d")), *FAST]
    assert main(argv) == 2
    assert "0 features at width" in one_error_line(capsys) and not out.exists()


@pytest.mark.parametrize("layout", ["rope@window:8;none+logn", "rope@window:8;none+llama4"])
def test_randomized_positions_are_refused_beside_a_layer_temperature(layout):
    with pytest.raises(ValueError, match="random_positions and layer 1's (logn|llama4)"):
        ModelConfig(n_layers=2, d_model=32, n_heads=2, train_len=32, layout=layout, random_positions=256)
    ModelConfig(n_layers=2, d_model=32, n_heads=2, train_len=32, layout="rope@window:8;none", random_positions=256)


def test_a_finetune_at_a_longer_length_keeps_the_log_n_length_it_trained_with(layered):
    out, _ = layered
    model_cfg, _ = configs_from_run(out, train_len=64)
    temperature = model_cfg.stack[-1].temperature
    assert temperature.spec == "logn:L=32" and model_cfg.stack[0].pattern.spec == "window:8"
    # the factor at position 63 of a model trained at 32: ln 64 / ln 32 = 1.2, as the parent had it
    assert float(temperature.query_scale(None, torch.tensor([63]))) == pytest.approx(1.2)
    assert float(logn_scale(torch.tensor([63]), 32)) == pytest.approx(1.2)


def test_resume_takes_the_same_layout_written_another_way(layered, tmp_path, capsys):
    import shutil

    out, data = layered
    run = tmp_path / "run"
    shutil.copytree(out, run)

    def resume(layout: str, steps: int) -> int:
        return main(["train", "--resume", "--out", str(run), "--data", str(data), "--preset", "tiny", "--steps",
                     str(steps), "--quiet", "--threads", "1", "--layout", layout])

    assert resume(" rope@window:8 ;  none@causal + logn ", 3) == 0
    assert json.loads((run / "config.json").read_text())["model"]["layout"] == "hwfa:W=8"  # the run's own text
    capsys.readouterr()
    assert resume("rope@window:8;none", 4) == 2  # other layers: refused
    assert "model.layout" in one_error_line(capsys)


def test_a_finetune_layout_with_missing_parameters_names_the_layout_and_layer(layered, tmp_path, capsys):
    out, _ = layered
    argv = ["train", "--init", str(out), "--layout", "rope:scaling=yarn@window:8;none", "--out",
            str(tmp_path / "ft"), "--steps", "1", "--quiet", "--threads", "1"]
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert "layout layer 0" in line and "needs a factor" in line and "--scheme" not in line
    assert not (tmp_path / "ft").exists()


def test_a_validation_split_shorter_than_one_window_is_refused_before_the_run(tmp_path, capsys):
    corpus = tmp_path / "one.py"  # one file: its last 5 % is the validation split (49 tokens)
    corpus.write_bytes(b"def f(x):\n    return x * 2 + 1\n" * 30)
    out = tmp_path / "run"
    argv = ["train", "--scheme", "rope", "--train-len", "64", "--data", str(corpus), "--out", str(out), *FAST]
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert "validation split has" in line and "fewer than one window of 65" in line and not out.exists()


@pytest.mark.parametrize("spec, words", [
    ("global=window:16;global=causal", ["selector 'global' twice"]),
    ("local=window:4;L0=causal", ["L0 is selected by both", "local", "L0"]),
    ("L1-0=window:4", ["empty range"]),
])
def test_repeated_overlapping_and_empty_selectors_are_refused(spec, words):
    stack = layouts.parse("hwfa:W=8", n_layers=2, train_len=32)
    with pytest.raises(ValueError) as info:
        stack.resolve(spec)
    assert all(w in str(info.value) for w in words), str(info.value)
    with pytest.raises(ValueError, match="L0 is selected by both"):
        stack.replace_schemes("local=alibi;L0=rope")
