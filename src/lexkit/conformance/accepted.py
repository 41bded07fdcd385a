"""Differences a runtime knows it has, each with its reason: a file a runtime's CI pins, so that
``lexkit conformance --check --accept FILE`` (and :func:`expect` in its own tests) fails on a *new*
difference only. One difference a line, ``IMPL CASE  # reason`` (a glob for the case, ``yarn/*``; the
reason required: a difference accepted without one is a difference forgotten); blank lines and lines
that start with ``#`` are comments::

    # transformers 5.24: lexkit's conventions differ, not bugs
    transformers rope/partial-0.3              # rotates int(f·h) dims, lexkit 2·floor(f·h/2)
    transformers dynamic/shorter-than-longest  # the original Dynamic NTK cache: the longest call's base
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from .cases import Case
from .harness import Result, check


class AcceptedError(ValueError):
    """A file of accepted differences that cannot be read: the file, the line and why."""


def load(path: str | Path) -> dict[tuple[str, str], str]:
    """(impl, case glob) -> reason, from the file at ``path``."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise AcceptedError(f"--accept {path}: cannot read it ({exc.strerror or exc})") from None
    out = {}
    for number, line in enumerate(text.splitlines(), 1):
        body, _, reason = line.partition("#")
        if not body.strip():
            continue
        words = body.split()
        if len(words) != 2 or not reason.strip():
            raise AcceptedError(f"--accept {path}, line {number}: {line.strip()!r}: write IMPL CASE  # reason "
                                "(e.g. transformers rope/partial-0.3  # rotates int(f·h) dims)")
        out[(words[0], words[1])] = reason.strip()
    return out


def reason(accepted: dict[tuple[str, str], str], result: Result) -> str | None:
    """Why ``result``'s difference is accepted, or None (a pass or an n/a is never 'accepted')."""
    if result.status not in ("fail", "error"):
        return None
    return next((why for (impl, pattern), why in accepted.items()
                 if impl == result.impl and fnmatch.fnmatchcase(result.case, pattern)), None)


def stale(accepted: dict[tuple[str, str], str], results: list[Result]) -> list[str]:
    """The accepted differences no result shows any more (the runtime fixed them: remove the line)."""
    ran = {(r.impl, r.case): r for r in results}
    out = []
    for (impl, pattern), _ in accepted.items():
        hits = [r for (i, name), r in ran.items() if i == impl and fnmatch.fnmatchcase(name, pattern)]
        if hits and not any(r.status in ("fail", "error") for r in hits):
            out.append(f"{impl} {pattern}")
    return out


def expect(adapter, case: Case, accepted: str | Path | dict | None = None) -> Result:
    """``adapter`` on ``case`` in a runtime's own tests: the result when it passes, is n/a or differs
    as ``accepted`` says; else AssertionError with the case, what differs and the case's why."""
    table = load(accepted) if isinstance(accepted, (str, Path)) else (accepted or {})
    result = check(adapter, case)
    if result.status in ("fail", "error") and reason(table, result) is None:
        raise AssertionError(f"{case.name}: {result.status}: {result.detail} (the case: {case.why})")
    return result
