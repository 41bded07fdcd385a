"""The README's Python tour runs as written, and its commands name real sub-commands."""

import re
from pathlib import Path

from lexkit.cli import COMMANDS

README = Path(__file__).resolve().parent.parent / "README.md"


def test_python_tour_runs_as_written():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_commands_exist():
    shell = "".join(re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S))
    used = set(re.findall(r"^lexkit (\w+)", shell, flags=re.M))
    assert used and used <= set(COMMANDS)


def test_the_retrieval_recipe_is_the_measured_one():
    """The README's "teach it to retrieve" line trained a 50 % copy mix at the preset's batch and
    steps, which docs/retrieval.md measured never to change phase (0 % by 4,000 steps): the line
    is the recipe measured there and trained by the study's table G."""
    from lexkit import presets
    from lexkit.study.retrieval import RECIPE, STEPS

    shell = "".join(re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S))
    (line,) = [x for x in shell.splitlines() if x.startswith("lexkit train") and "--mix" in x]
    for flag, value in (("--preset", RECIPE["preset"]), ("--batch", RECIPE["batch"]), ("--mix", RECIPE["mix"]),
                        ("--steps", STEPS)):
        assert f"{flag} {value} " in line, (flag, line)
    assert "--lr" not in line and presets.get(RECIPE["preset"])["lr"] == RECIPE["lr"]
