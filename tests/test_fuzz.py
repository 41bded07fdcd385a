"""Property-based fuzzing (Hypothesis) of spec strings, length lists and CLI argument vectors.

The property: no input makes lexkit raise anything but its documented ``ValueError`` (library)
or makes a command print a traceback or exit with a code other than 0, 2 or 130 (CLI).
Example counts are bounded and the search is derandomized, so the suite is fast and repeatable.
"""

import itertools
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lexkit import attention, positions
from lexkit.cli import main
from lexkit.core.specs import parse_lengths

#: LEXKIT_FUZZ=N: N random (not derandomized) examples per test, for a longer hunt by hand
HUNT = int(os.environ.get("LEXKIT_FUZZ", "0"))
FAST = settings(max_examples=HUNT or 50, deadline=None, derandomize=not HUNT)
#: the spec properties again with more examples (``make test-slow``; the fast suite runs 50 of them)
MORE = settings(max_examples=HUNT or 400, deadline=None, derandomize=not HUNT)
CLI = settings(max_examples=HUNT or 30, deadline=None, derandomize=not HUNT,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
#: the command lines again with more examples (``make test-slow``; the fast suite runs 30)
CLI_MORE = settings(CLI, max_examples=HUNT or 200)

#: any text: every code point but the surrogates (WORDS holds one lone surrogate), drawn from Unicode's
#: categories; ``st.text()``'s default alphabet is the code points UTF-8 can encode, which Hypothesis works out
#: by encoding each of them once a checkout (1.5 s of a fresh clone's first run, cached in .hypothesis/)
TEXT = st.characters(exclude_categories=("Cs",))
NUMBERS = ["0", "-1", "1", "2", "3", "8", "16", "1e3", "0.5", "inf", "-inf", "nan", "1e308",
           "99999999999999999999999", str(2**31), str(2**53 + 1), "", " ", "x", "8,16", "8,8", ",", "16,", "-8,16",
           "0x10", "١٢"]
WORDS = ["", ":", "=", ",", "rope", "alibi", "xpos", "learned", "window", "bca", "causal", "sinks", "t5",
         "kerple-log", "base", "gamma", "W", "slope", "a=b", "é", "\x00", "💥", "\udcff"]


def _spec_text():
    name = st.sampled_from(positions.names() + attention.names() + WORDS)
    key = st.sampled_from(WORDS + ["base", "gamma", "W", "scale", "factor", "sinks", "max_len", "decay"])
    value = st.sampled_from(NUMBERS + WORDS + ["true", "false"])
    item = st.one_of(st.builds(lambda k, v: f"{k}={v}", key, value), value)
    structured = st.builds(lambda n, items: n + (":" + ",".join(items) if items else ""), name,
                           st.lists(item, max_size=3))
    return st.one_of(structured, st.text(TEXT, max_size=30))


@FAST
@given(_spec_text())
def test_any_scheme_spec_is_a_scheme_or_a_value_error(spec):
    try:
        scheme = positions.create(spec, n_heads=2, head_dim=8, max_len=64)
    except ValueError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert positions.canonical(scheme.spec) == scheme.spec


@FAST
@given(_spec_text(), st.sampled_from([None, 1, 2, 64]))
def test_any_pattern_spec_is_a_pattern_or_a_value_error(spec, default_window):
    try:
        pattern = attention.create(spec, default_window=default_window)
    except ValueError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert attention.create(pattern.spec, default_window=default_window).spec == pattern.spec


@FAST
@given(st.one_of(st.lists(st.sampled_from(NUMBERS), min_size=1, max_size=4).map(",".join), st.text(TEXT, max_size=20)))
def test_any_lengths_text_is_lengths_or_a_value_error(text):
    try:
        lengths = parse_lengths(text)
    except ValueError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert lengths == sorted(set(lengths)) and all(isinstance(n, int) and n > 0 for n in lengths)


@pytest.mark.slow  # fast sibling: the three properties above, 50 examples each
@MORE
@given(_spec_text(), st.sampled_from([None, 1, 2, 64]),
       st.one_of(st.lists(st.sampled_from(NUMBERS), min_size=1, max_size=4).map(",".join), st.text(TEXT, max_size=20)))
def test_the_spec_properties_hold_on_more_examples(spec, default_window, text):
    test_any_scheme_spec_is_a_scheme_or_a_value_error.hypothesis.inner_test(spec)
    test_any_pattern_spec_is_a_pattern_or_a_value_error.hypothesis.inner_test(spec, default_window)
    test_any_lengths_text_is_lengths_or_a_value_error.hypothesis.inner_test(text)


# -- the command line -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    data = root / "data"
    data.mkdir()
    for i in range(40):
        (data / f"d{i}.py").write_bytes((f"def f{i}(x):\n    return x * {i}\n" * 30).encode())
    run = root / "run"
    assert main(["train", "--scheme", "alibi", "--preset", "tiny", "--steps", "4", "--save-every", "2",
                 "--eval-every", "2", "--out", str(run), "--data", str(data), "--quiet", "--threads", "1"]) == 0
    return root


FLAGS = {
    "train": ["--scheme", "--steps", "--batch", "--train-len", "--lr", "--layers", "--dim", "--heads", "--seed",
              "--save-every", "--eval-every", "--threads", "--device", "--data", "--preset"],
    "eval": ["--lengths", "--pattern", "--stride", "--max-docs", "--max-bytes", "--batch-size", "--threads",
             "--kernel", "--device", "--json", "--csv"],
    "sample": ["--bytes", "--pattern", "--temperature", "--top-k", "--seed", "--prompt", "--kernel", "--threads"],
    "resolution": ["--scheme", "--lengths", "--pattern", "--heads", "--head-dim", "--seed", "--texts", "--batch",
                   "--json", "--plot"],
    "runs": ["--depth"],
    "schemes": [], "patterns": [], "presets": [],
}
VALUES = NUMBERS + WORDS + ["tiny", "cpu", "cuda", "auto", "dense", "window:4", "bca:8", "rope:base=inf",
                            "OUT/x.json", "OUT", "/dev/null", "/no/such/dir/f.json", "RUN", "DATA"]
counter = itertools.count()


@st.composite
def argv(draw):
    command = draw(st.sampled_from(sorted(FLAGS)))
    args = [command]
    if command in ("eval", "sample") or (command == "resolution" and draw(st.booleans())):
        args.append(draw(st.sampled_from(["RUN", "RUN", "OUT", "/no/such/run", ""])))
    if command == "train":
        args += ["--preset", "tiny", "--out", "NEWOUT", "--quiet", "--data", "DATA"]
    if command == "runs":
        args.append(draw(st.sampled_from(["RUN", "OUT", "/no/such/dir", "/dev/null"])))
    flags = FLAGS[command] * 4 + ["--import", "--help", "--nope"]
    for flag in draw(st.lists(st.sampled_from(flags), max_size=4)):
        args.append(flag)
        if flag not in ("--help", "--nope"):
            args.append(draw(st.sampled_from(VALUES)))
    if draw(st.integers(0, 9)) == 0:
        args += draw(st.lists(st.text(TEXT, max_size=8), max_size=3))
    return args


@pytest.mark.slow  # fast sibling: test_no_command_line_prints_a_traceback, 30 examples
@CLI_MORE
@given(argv())
def test_no_command_line_prints_a_traceback_on_more_examples(tiny_run, tmp_path_factory, capsys, args):
    test_no_command_line_prints_a_traceback.hypothesis.inner_test(tiny_run, tmp_path_factory, capsys, args)


@CLI
@given(argv())
def test_no_command_line_prints_a_traceback(tiny_run, tmp_path_factory, capsys, args):
    out = tmp_path_factory.mktemp("out", numbered=True)
    slot = {"RUN": str(tiny_run / "run"), "DATA": str(tiny_run / "data"), "OUT": str(out),
            "NEWOUT": str(out / f"new{next(counter)}")}
    args = [slot.get(a, a.replace("OUT", str(out)) if a.startswith("OUT/") else a) for a in args]
    if args[0] == "train" and "--steps" not in args:
        args += ["--steps", "2"]  # keep a valid training short
    if args[0] == "sample" and "--bytes" not in args:
        args += ["--bytes", "4"]
    capsys.readouterr()
    here = os.getcwd()
    os.chdir(out)  # a relative output the fuzzer names (--json 0) lands here, not in the checkout
    try:
        code = main(args)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        code = exc.code
    finally:
        os.chdir(here)
    err = capsys.readouterr().err
    assert code in (0, 2, 130), (args, code, err)
    assert "Traceback" not in err, (args, err)
    if code == 2:
        lines = [line for line in err.splitlines() if not line.startswith("warning: ")]
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, err)
