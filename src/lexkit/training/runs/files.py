"""The files of a run directory, their names, and how every one is written: to a temporary name in the
same directory, then renamed over the old one, so a kill at any moment leaves the last good file
whole. Files get the mode the umask gives (like any file a user writes).

::

    RUN_DIR/config.json               model, training and data settings (enough to rebuild both)
    RUN_DIR/model.safetensors         the weights (deterministic bytes: no timestamps)
    RUN_DIR/checkpoint.safetensors    weights + AdamW state + RNG state, trainer state as metadata
    RUN_DIR/metrics.jsonl             one JSON object per logged step
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...core.checks import strict_json
from ...core.errors import RunError

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
CHECKPOINT = "checkpoint.safetensors"
METRICS = "metrics.jsonl"
RUN_DIR_VERSION = 1


class RunWarning(UserWarning):
    """Something about a run a user should know that does not stop the command."""


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write to ``path`` through a temporary file and a rename (never a half-written file). A link is
    followed (its target written, the link kept); a path that is no regular file (``/dev/null``,
    ``/dev/stdout``, a pipe) is written as it is: a rename over it would replace the device by a file."""
    path = Path(path)
    if path.is_symlink():
        path = path.resolve()
    if path.exists() and not path.is_file():
        try:
            with open(path, "wb") as handle:
                handle.write(data.encode() if isinstance(data, str) else data)
        except OSError as exc:
            raise RunError(f"cannot write {path}: {exc.strerror or exc}") from exc
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RunError(f"cannot write {path}: {exc.strerror or exc}") from exc


def umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_json(path: Path, obj: Any) -> None:
    """``obj`` as indented strict JSON (NaN and inf as null), atomically (every JSON document
    lexkit writes goes through here)."""
    atomic_write(path, strict_json(obj, indent=2) + "\n")


def read_metrics(run_dir: str | Path) -> list[dict]:
    """The logged rows. A partial last line (a write cut short by a kill) is dropped; a bad line
    anywhere else is a RunError naming the file and line."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        return []
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise RunError(f"cannot read {path}: {exc.strerror or exc}") from exc
    lines = text.split("\n")
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            if number == len(lines):  # no newline after it: the last write was cut short
                break
            raise RunError(f"{path}: line {number} is not a metrics row ({exc}); remove that line to go on") from exc
        rows.append(row)
    return rows
