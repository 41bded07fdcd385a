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
