"""A new train setting is one field (issue 68 item 2): a field added to TrainConfig (here a subclass put in its
place) is, with nothing else written, a flag of ``lexkit train`` (its help, metavar and bounds from the
field), checked in the library as the config is built (the command refuses a bad value with one line and
writes nothing), recorded in config.json's ``train`` and compared on ``--resume`` (the merge in
lexkit.training.runs)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cli_checks import one_error_line, train_refused
from lexkit.cli import build_parser, main
from lexkit.core.options import setting
from lexkit.training import settings
from toy_corpus import write_corpus


@dataclasses.dataclass
class WithProbe(settings.TrainConfig):
    """TrainConfig and one setting more, declared as every setting is: a field with its flag's metadata."""

    probe_every: int = setting(0, "run the probe every N steps (default: 0, never)", metavar="N", minimum=0,
                               maximum=100)


@pytest.fixture
def probe_setting(monkeypatch):
    """The new setting in TrainConfig's place, where the command, the configs and the trainer look it up."""
    monkeypatch.setattr(settings, "TrainConfig", WithProbe)
    return WithProbe


def _argv(out, data, *extra: str) -> list[str]:
    return ["train", "--scheme", "rope", "--preset", "tiny", "--steps", "2", "--save-every", "2", "--eval-every", "2",
            "--quiet", "--threads", "1", "--out", str(out), "--data", str(data), *extra]


def test_the_new_field_is_a_flag_with_its_help(probe_setting, capsys):
    from lexkit.cli.train import _overrides

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--probe-every N run the probe every N steps (default: 0, never)" in text
    parser = build_parser("train")
    assert _overrides(parser.parse_args(_argv("o", "d", "--probe-every", "5")))["probe_every"] == 5
    assert _overrides(parser.parse_args(_argv("o", "d")))["probe_every"] is None  # not given: the preset's, the run's


def test_its_bounds_are_checked_in_the_library_and_by_the_command(probe_setting, tmp_path, capsys):
    assert settings.configs("tiny", probe_every=7)[1].probe_every == 7
    with pytest.raises(ValueError, match=r"probe_every must be an integer >= 0 \(at most 100\), got 101"):
        settings.configs("tiny", probe_every=101)
    line = train_refused(tmp_path, capsys, ["--scheme", "rope", "--probe-every", "101"])
    assert "probe_every must be an integer >= 0 (at most 100), got 101" in line


def test_it_has_its_place_in_config_json_and_is_compared_on_resume(probe_setting, tmp_path, capsys):
    data = write_corpus(tmp_path / "data")
    out = tmp_path / "run"
    assert main(_argv(out, data, "--probe-every", "3")) == 0
    train = json.loads((out / "config.json").read_text())["train"]
    assert train["probe_every"] == 3 and list(train)[-1] == "probe_every"  # after the fields it extends
    capsys.readouterr()
    assert main(["train", "--resume", "--out", str(out), "--probe-every", "4", "--quiet", "--threads", "1"]) == 2
    assert "train.probe_every (3 -> 4)" in one_error_line(capsys)
    assert main(["train", "--resume", "--out", str(out), "--steps", "3", "--quiet", "--threads", "1"]) == 0
    assert json.loads((out / "config.json").read_text())["train"]["probe_every"] == 3  # the run's own, kept
