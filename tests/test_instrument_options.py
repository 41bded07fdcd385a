"""An instrument's settings declared once (lexkit.core.options): every field of EvalOptions, RetrievalOptions and
ResolutionOptions is its command's flag, with its help; a new eval option is one field (tests/fixtures/
toy_eval_option.py adds ``--worst``), its flag and its check found; and the checks are the library's, so
``lexkit.evaluate(..., lengths=[10**9])`` is refused as ``lexkit eval --lengths 1000000000`` is."""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

from cli_checks import one_error_line
from lexkit.cli import eval as eval_cli
from lexkit.cli import main
from lexkit.cli import resolution as resolution_cli
from lexkit.cli import retrieval as retrieval_cli
from lexkit.core import options as declared
from lexkit.instruments import base
from lexkit.instruments.evaluate import EvalOptions
from lexkit.instruments.resolution import ResolutionOptions
from lexkit.instruments.retrieval import RetrievalOptions

BILLION = 10**9


def parser_of(module) -> argparse.ArgumentParser:
    return module.add_parser(argparse.ArgumentParser().add_subparsers())


@pytest.mark.parametrize("module, options", [(eval_cli, EvalOptions), (retrieval_cli, RetrievalOptions),
                                             (resolution_cli, ResolutionOptions)])
def test_every_setting_is_its_commands_flag_with_its_help(module, options):
    actions = {a.dest: a for a in parser_of(module)._actions}
    for field in dataclasses.fields(options):
        action = actions.pop(field.name)
        assert action.option_strings[0] == declared.flag_of(field)
        text = field.metadata["help"]
        assert action.help == (text() if callable(text) else text)
    # what is left is what is not a setting: the target, the outputs, the device, threads, progress
    assert set(actions) <= {"help", "target", "json", "csv", "plot", "device", "threads", "progress"}
    defaults = declared.given(parser_of(module).parse_args(["T"]), options)
    assert options(**defaults) == options()  # a flag left out is the library's default


@pytest.fixture
def worst(monkeypatch):
    """The toy eval option's instrument registered for this test alone."""
    import lexkit.cli.inspect  # noqa: F401 (lexkit's own instruments registered before the registry is copied)
    import toy_eval_option

    monkeypatch.setattr(base.INSTRUMENTS, "_classes", dict(base.INSTRUMENTS._classes))
    base.register(toy_eval_option.EvalWorst)
    return toy_eval_option


def test_a_new_eval_option_is_one_field_its_flag_and_its_check_found(worst, capsys):
    with pytest.raises(SystemExit):
        main(["--import", "toy_eval_option", "eval-worst", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--worst N print only the N cells of highest bpb (default: every cell)" in text
    assert "--lengths L,L,... comma-separated lengths in bytes" in text and "--paired" in text  # eval's, all
    for bad, message in [(dict(worst=0), "--worst must be a positive integer (at most 16), got 0"),
                         (dict(worst=17), "--worst must be a positive integer (at most 16), got 17"),
                         (dict(lengths=[BILLION]), "--lengths: length 1,000,000,000 is above the maximum"),
                         (dict(paired=True, lengths=[64]), "--paired compares each longer length")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            worst.WorstOptions(**bad).check()  # the library's check: the base's, and the new field's


@pytest.mark.parametrize("extra, message", [
    (["--worst", "17"], "--worst must be a positive integer (at most 16), got 17"),
    (["--lengths", str(BILLION)], "--lengths: length 1,000,000,000 is above the maximum 1,048,576"),
    (["--stride", "0"], "--stride must be a positive integer"),
])
def test_the_new_option_is_refused_in_one_line_and_nothing_is_written(worst, run, tmp_path, capsys, extra, message):
    argv = ["--import", "toy_eval_option", "eval-worst", str(run), *extra, "--json", str(tmp_path / "w.json")]
    assert main(argv) == 2
    assert message in one_error_line(capsys) and not (tmp_path / "w.json").exists()


def test_the_new_option_takes_effect(worst, run, capsys):
    assert main(["--import", "toy_eval_option", "eval-worst", str(run), "--lengths", "8,16", "--pattern", "causal",
                 "--pattern", "window:4", "--worst", "2", "--max-docs", "2", "--no-progress"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    bpb = [float(line.split()[-1]) for line in lines]
    assert len(lines) == 2 and bpb == sorted(bpb, reverse=True)


# -- the library refuses what the command refuses, with the same words ---------------------------------------
def command_error(capsys, argv) -> str:
    assert main(argv) == 2
    return one_error_line(capsys).removeprefix("error: ")


def test_lengths_past_the_bound_are_refused_in_the_library_as_in_the_command(run, capsys):
    import lexkit
    from lexkit.evaluate import evaluate_run
    from lexkit.retrieval import retrieval_run

    line = command_error(capsys, ["eval", str(run), "--lengths", str(BILLION)])
    assert line == "--lengths: length 1,000,000,000 is above the maximum 1,048,576 (it would not fit memory)"
    model = lexkit.load(run).model
    for call in (lambda: lexkit.evaluate(model, [bytes(64)], [16, BILLION]),
                 lambda: evaluate_run(run, lengths=[BILLION]),
                 lambda: evaluate_run(run / "no-such-run", lengths=[BILLION]),  # refused before it loads
                 lambda: retrieval_run(str(run), "copy", lengths=[BILLION])):
        with pytest.raises(ValueError) as refused:
            call()
        assert str(refused.value) == line
    line = command_error(capsys, ["resolution", "--scheme", "rope", "--lengths", str(BILLION)])
    assert line == "--lengths: length 1,000,000,000 is above the maximum 65,536 (it would not fit memory)"
    for target in ("rope", run):
        with pytest.raises(ValueError) as refused:
            lexkit.resolution(target, [BILLION])
        assert str(refused.value) == line
    with pytest.raises(ValueError, match="--texts must be a positive integer"):
        lexkit.resolution(run, [16], texts_per_length=0)


@pytest.mark.parametrize("options, message", [
    (EvalOptions(max_docs=0), "--max-docs must be a positive integer"),
    (EvalOptions(kernel="fast"), "--kernel must be one of auto, dense, chunked, flex, got 'fast'"),
    (EvalOptions(patterns=("nope",)), "unknown attention pattern 'nope'"),
    (EvalOptions(paired=True, start="bos", lengths=[8, 16]), "--paired compares lengths with the start held fixed"),
    (RetrievalOptions(samples=0), "--samples must be a positive integer"),
    (RetrievalOptions(seed=-1), "--seed must be an integer >= 0"),
    (ResolutionOptions(heads=5000), "--heads must be a positive integer (at most 4,096), got 5000"),
    (ResolutionOptions(train_len=2**17), "--train-len must be a positive integer (at most 65,536)"),
])
def test_options_check_names_the_flag(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        options.check()
