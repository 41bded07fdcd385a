"""The instrument seam (lexkit.instruments.base): a toy instrument added as a user's would be (one folder,
tests/fixtures/toy_instrument/, and one ``register``) is ``lexkit toy-norms`` with flags made from its
options, its --json/--csv/--plot from the seam, its numbers those of an independent computation; bad input
one error line; lexkit inspect's two instruments measure through the same seam as their command."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from safetensors.torch import load_file

from cli_checks import one_error_line
from lexkit.instruments import base


@pytest.fixture
def toy(monkeypatch):
    """The toy instrument registered for this test alone (the registry restored after it)."""
    import lexkit.cli.inspect  # noqa: F401 (lexkit's own instruments registered before the registry is copied)
    import toy_instrument

    monkeypatch.setattr(base.INSTRUMENTS, "_classes", dict(base.INSTRUMENTS._classes))
    base.register(toy_instrument.ToyNorms)
    return toy_instrument


def test_the_toy_is_a_command_whose_numbers_are_the_weights_norms(toy, run, tmp_path, capsys):
    from lexkit.cli import main

    out = tmp_path / "t"
    assert main(["--import", "toy_instrument", "toy-norms", str(run), "--top", "4", "--matrices", "--json",
                 f"{out}.json", "--csv", f"{out}.csv", "--plot", f"{out}.png"]) == 0
    text = capsys.readouterr().out
    report = json.loads((tmp_path / "t.json").read_text())
    assert report["report"] == "toy.norms" and report["report_version"] == 1 and "lexkit_version" in report
    # independently: every 2-d tensor of the weights file, its float64 Frobenius norm by the sum of squares
    weights = {k: v.double() for k, v in load_file(str(run / "model.safetensors")).items() if v.dim() == 2}
    norms = sorted(((math.sqrt(float((v * v).sum())), k) for k, v in weights.items()), key=lambda p: (-p[0], p[1]))
    assert [r["parameter"] for r in report["rows"]] == [k for _, k in norms[:4]]
    assert [r["norm"] for r in report["rows"]] == pytest.approx([n for n, _ in norms[:4]], rel=1e-12)
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert lines[0] == "parameter,shape,norm" and len(lines) == 5
    assert (tmp_path / "t.png").stat().st_size and f"{report['rows'][0]['norm']:.4f}" in text


@pytest.mark.parametrize("extra, message", [
    (["--top", "0"], "--top must be a positive integer (at most 50), got 0"),
    (["--top", "51"], "--top must be a positive integer (at most 50), got 51"),
])
def test_the_toy_refuses_bad_options_in_one_line_and_writes_nothing(toy, run, tmp_path, capsys, extra, message):
    from lexkit.cli import main

    assert main(["toy-norms", str(run), *extra, "--json", str(tmp_path / "t.json"), "--import", "toy_instrument"]) == 2
    assert message in one_error_line(capsys) and not (tmp_path / "t.json").exists()


def test_options_must_be_a_dataclass_and_a_builtin_name_is_not_taken(toy):
    from lexkit.cli import build_parser
    from lexkit.cli import sample as sample_command

    class Bad(base.Instrument):
        name, Options = "bad", dict

    with pytest.raises(TypeError, match="Options must be a dataclass"):
        base.register(Bad)

    class Sample(toy.ToyNorms):
        name = "sample"

    base.register(Sample)
    with pytest.warns(UserWarning, match="has the name of a built-in command"):
        parser = build_parser()
    assert parser.parse_args(["sample", "RUN"]).run is sample_command.run  # still the built-in


def test_offers_is_whether_the_instrument_defines_the_output(toy):
    assert toy.ToyNorms.offers("csv") and toy.ToyNorms.offers("figures")

    class Plain(base.Instrument):
        name = "plain"

    assert not Plain.offers("csv") and not Plain.offers("figures")


def test_inspect_measures_through_the_seam(run):
    import lexkit.cli.inspect  # noqa: F401 (registers lexkit inspect's two instruments)
    from lexkit.instruments.inspect.bytes import BytesOptions
    from lexkit.instruments.inspect.bytes.measure import embedding_run
    from lexkit.instruments.inspect.needle_mass import NeedleMassOptions
    from lexkit.instruments.inspect.needle_mass.measure import needle_mass_run

    bytes_ = base.get("inspect.bytes")
    assert bytes_.measure(str(run), BytesOptions(top=3)) == embedding_run(str(run), top=3)
    assert bytes_.text(embedding_run(str(run), top=3), BytesOptions(all=True)).count("\n") > 257
    mass = base.get("inspect.needle_mass")
    options = dataclasses.replace(NeedleMassOptions(), lengths=[64], depths=(50.0,), samples=1, size=4)
    assert mass.measure(str(run), options) == needle_mass_run(str(run), "copy", lengths=[64], depths=[50.0],
                                                              samples=1, size=4)
