"""Differences a runtime knows it has, each with its reason: a file a runtime's CI pins, so that
``lexkit conformance --check --accept FILE`` (and :func:`expect` in its own tests) fails on a *new*
difference only. One difference a line, ``IMPL CASE [STATUS]  # reason`` (a glob for the case,
``yarn/*``, that must match a case of the suite; STATUS ``fail``, the default, or ``error``: a line
accepts the verdict it names, so a case accepted as differing that later crashes is new; the reason
required: a difference accepted without one is a difference forgotten); blank lines and lines that
start with ``#`` are comments::

    # transformers 5.24: lexkit's conventions differ, not bugs
    transformers rope/partial-0.3              # rotates int(f·h) dims, lexkit 2·floor(f·h/2)
    transformers dynamic/shorter-than-longest  # the original Dynamic NTK cache: the longest call's base
    vllm rope/partial-0.3 error                # int(f·h) = 19 rotary dims: its forward raises
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from .cases import CASES, Case
from .harness import Result, check
from .models.cases import CASES as MODEL_CASES
from .models.cases import ModelCase

#: the verdicts a line may accept
STATUSES = ("fail", "error")


class AcceptedError(ValueError):
    """A file of accepted differences that cannot be read: the file, the line and why."""


def load(path: str | Path, impls: list[str] | None = None) -> dict[tuple[str, str, str], str]:
    """(impl, case glob, status) -> reason, from the file at ``path``; with ``impls``, an implementation
    a line names must be one of them."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise AcceptedError(f"--accept {path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise AcceptedError(f"--accept {path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                            f"{exc.start})") from None
    out = {}
    for number, line in enumerate(text.splitlines(), 1):
        body, _, why = line.partition("#")
        if not body.strip():
            continue
        words = body.split()
        where = f"--accept {path}, line {number}: {line.strip()!r}"
        if len(words) not in (2, 3) or not why.strip():
            raise AcceptedError(f"{where}: write IMPL CASE [fail|error]  # reason "
                                "(e.g. transformers rope/partial-0.3  # rotates int(f·h) dims)")
        impl, pattern, status = words[0], words[1], words[2] if len(words) == 3 else "fail"
        if status not in STATUSES:
            raise AcceptedError(f"{where}: {status!r} is not a verdict to accept; valid: {', '.join(STATUSES)}")
        if impls is not None and impl not in impls:
            raise AcceptedError(f"{where}: {impl} is not an implementation; valid: {', '.join(impls)}")
        if not any(fnmatch.fnmatchcase(c.name, pattern) for c in (*CASES, *MODEL_CASES)):
            raise AcceptedError(f"{where}: {pattern} matches no case of the suite (`lexkit conformance --list`)")
        out[(impl, pattern, status)] = why.strip()
    return out


def _entries(accepted: dict) -> list[tuple[str, str, str, str]]:
    """(impl, pattern, status, reason) of each line; a key of two, (impl, pattern), accepts a fail."""
    return [(*key, "fail", why) if len(key) == 2 else (*key, why) for key, why in accepted.items()]


def reason(accepted: dict, result: Result) -> str | None:
    """Why ``result``'s difference is accepted, or None (a pass or an n/a is never 'accepted'; a line
    accepts only the verdict it names)."""
    if result.status not in STATUSES:
        return None
    return next((why for impl, pattern, status, why in _entries(accepted)
                 if impl == result.impl and status == result.status and fnmatch.fnmatchcase(result.case, pattern)),
                None)


def stale(accepted: dict, results: list[Result]) -> list[str]:
    """The accepted differences no result shows any more (the runtime fixed them: remove the line)."""
    out = []
    for impl, pattern, status, _ in _entries(accepted):
        hits = [r for r in results if r.impl == impl and fnmatch.fnmatchcase(r.case, pattern)]
        if hits and not any(r.status == status for r in hits):
            out.append(f"{impl} {pattern}" + (f" {status}" if status != "fail" else ""))
    return out


def judge(results: list[Result], accepted: dict, source: str = "") -> tuple[list[str], bool]:
    """The ``check:`` lines of ``--check`` over ``results`` and whether a difference is new (a FAIL or
    error no line of ``accepted``, read from ``source``, names)."""
    lines = []
    new = [r for r in results if r.status in STATUSES and reason(accepted, r) is None]
    if accepted:
        kept = sum(1 for r in results if reason(accepted, r) is not None)
        lines.append(f"{kept} difference{'s' if kept != 1 else ''} accepted by {source}, {len(new)} not")
        lines += [f"{line} is accepted in {source} but no longer differs so: correct or remove the line"
                  for line in stale(accepted, results)]
    lines += [f"new difference: {r.impl} x {r.case}: {r.status}: {r.detail}" for r in new]
    return lines, bool(new)


def unchecked(results: list[Result], ran: list[str], skipped: list[dict], named: set[str]) -> list[str]:
    """What ``--check`` finds unchecked among the implementations asked for by name (``named``): one
    skipped (with why), or one that ran (``ran``) and was n/a on every case; not running it is a failure."""
    out = [f"{s['impl']} was skipped ({s['reason']})" for s in skipped if s["impl"] in named]
    return out + [f"{name} is n/a on every case" for name in ran
                  if name in named and all(r.status == "n/a" for r in results if r.impl == name)]


def expect(adapter, case: Case | ModelCase, accepted: str | Path | dict | None = None, root: Path | None = None):
    """``adapter`` on ``case`` in a runtime's own tests: the result when it passes, is n/a or differs
    as ``accepted`` says; else AssertionError with the case, what differs and the case's why. A model case
    (``lexkit.conformance.models.CASES``) runs a model runtime on its checkpoint (made under ``root``)."""
    table = load(accepted) if isinstance(accepted, (str, Path)) else (accepted or {})
    if isinstance(case, ModelCase):
        from .models.harness import check as check_model

        result = check_model(adapter, case, root)
    else:
        result = check(adapter, case)
    if result.status in ("fail", "error") and reason(table, result) is None:
        raise AssertionError(f"{case.name}: {result.status}: {result.detail} (the case: {case.why})")
    return result
