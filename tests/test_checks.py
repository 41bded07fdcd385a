"""lexkit.core.checks: number ranges, strict JSON and output paths, the checks every command shares."""

import json
import math

import pytest

from lexkit.cli import main
from lexkit.core import checks
from lexkit.training import runs


def test_checks_number_ranges():
    assert checks.number("--x", 5) == 5 and checks.number("--x", None) is None
    for bad in (0, -1, 2**31 + 1, True, 1.5):
        with pytest.raises(ValueError, match="--x"):
            checks.number("--x", bad)
    assert checks.number("--lr", 0.5, maximum=1.0, integer=False) == 0.5
    for bad in (math.inf, math.nan, -0.1, 0.0, 2.0):
        with pytest.raises(ValueError, match="--lr"):
            checks.number("--lr", bad, maximum=1.0, integer=False)
    assert checks.number("--w", 0, strict=False) == 0


def test_json_is_always_strict(run, tmp_path, capsys):
    doc = {"a": float("nan"), "b": [1.0, float("inf"), {"c": -float("inf")}], "d": 2}
    assert json.loads(checks.strict_json(doc)) == {"a": None, "b": [1.0, None, {"c": None}], "d": 2}

    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))

    out = tmp_path / "e.json"
    assert main(["eval", str(run), "--lengths", "16", "--json", str(out)]) == 0
    strict(out.read_text())
    assert main(["resolution", "--scheme", "rope", "--lengths", "16", "--json", str(out)]) == 0
    strict(out.read_text())
    for line in (run / runs.METRICS).read_text().splitlines():
        strict(line)


def test_plot_name_without_suffix_is_reported_as_written(tmp_path, capsys, unrendered):
    """The file the command reports is the one written. The figure is drawn but not rendered, and written
    under the very name the command gives matplotlib (matplotlib itself would add .png to a name without
    a suffix); rendering it is test_resolution.py's test_cli_analytic_writes_json_and_png."""
    out = tmp_path / "fig"
    assert main(["resolution", "--scheme", "rope", "--lengths", "16", "--plot", str(out)]) == 0
    assert f"wrote {out}.png" in capsys.readouterr().out
    assert (tmp_path / "fig.png").is_file() and not out.exists()
