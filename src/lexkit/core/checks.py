"""Checks of user input that every command shares: number ranges, writable outputs, strict JSON.

Every limit is stated here, so an error can say what would be valid. The length limits are
what fits memory: ``lexkit resolution`` keeps a few ``[heads, length]`` float64 curves and a
score block per query block (about 2 GB at 65,536 for rope), ``lexkit eval`` scores one window
of ``length`` tokens at a time (chunked kernel) and ``lexkit sample`` runs one forward pass per
byte over the whole context (quadratic time).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from .errors import LexkitError

MAX_EVAL_LENGTH = 1 << 20  # lexkit eval --lengths
MAX_RESOLUTION_LENGTH = 1 << 16  # lexkit resolution --lengths
MAX_TRAIN_LEN = 1 << 16  # lexkit train --train-len
MAX_SAMPLE_BYTES = 1 << 16  # lexkit sample --bytes
MAX_COUNT = 1 << 31  # steps, batches, documents, texts, threads, heads, widths, seeds ...
MAX_LR = 10.0


def number(flag: str, value: Any, *, maximum: float = MAX_COUNT, minimum: float | None = None,
           strict: bool = True, integer: bool = True) -> Any:
    """``value`` if it is a finite number in range, else a ValueError naming ``flag``.

    ``minimum`` defaults to 0, exclusive when ``strict`` (a positive number) and inclusive
    otherwise. ``None`` passes through (a flag not given).
    """
    if value is None:
        return None
    low = 0 if minimum is None else minimum
    top = f"{maximum:,}" if isinstance(maximum, int) else f"{maximum:g}"
    if integer:
        kind = "a positive integer" if strict and low == 0 else f"an integer {'>' if strict else '>='} {low}"
    else:
        kind = f"a finite number {'>' if strict else '>='} {low}"
    message = f"{flag} must be {kind} (at most {top}), got {value!r}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise ValueError(message)
    if not math.isfinite(value) or value > maximum or value < low or (strict and value == low):
        raise ValueError(message)
    return value


def lengths(flag: str, values: list[int], maximum: int) -> list[int]:
    """Every length at most ``maximum`` (their positivity is the parser's job)."""
    for n in values:
        if n > maximum:
            raise ValueError(f"{flag}: length {n:,} is above the maximum {maximum:,} (it would not fit memory)")
    return values


def writable(flag: str, path: str | os.PathLike) -> Path:
    """Fail before the work, not after it, when an output file cannot be written."""
    target = Path(path)
    if str(path) == "" or target.is_dir():
        raise LexkitError(f"{flag} {str(path)!r}: is a directory (give a file name)")
    parent = target.parent
    if not parent.is_dir():
        raise LexkitError(f"{flag} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise LexkitError(f"{flag} {path}: not writable (check the permissions of {parent})")
    return target


def png_path(flag: str, path: str) -> str:
    """The file a figure is written to: matplotlib adds ``.png`` to a name without a suffix."""
    writable(flag, path)  # a directory is refused as given, not as DIR.png
    if Path(path).suffix.lower() not in (".png", ".pdf", ".svg"):
        path = f"{path}.png"
        writable(flag, path)
    return path


def finite_or_none(obj: Any) -> Any:
    """A copy with every NaN/inf float replaced by None (JSON has no NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    return obj


def strict_json(obj: Any, **kw: Any) -> str:
    """Strict JSON (RFC 8259): non-finite numbers become null."""
    return json.dumps(finite_or_none(obj), allow_nan=False, **kw)
