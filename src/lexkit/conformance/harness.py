"""The harness: one implementation on one case -> a :class:`Result` (pass, fail, n/a or error, with the
largest error and where it is), and :func:`run` over many.

For each call of the case, every check the embedding offers is compared element by element with the
float64 reference (a property: with the implementation under the twin config) against the bounds of
:mod:`lexkit.conformance.tolerance`; the case passes when no element exceeds its bound. The inputs of
``rotate`` and ``scores`` are standard normal, drawn from a seed of the case's name and rounded to the
config's dtype before both sides see them (so input rounding is not counted as error).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field

import torch
from torch import Tensor

from . import tolerance
from .adapter import CHECKS, Adapter, NotApplicable, Unanswered, from_interleaved, to_interleaved
from .cases import Case
from .reference import Reference

HEADS = 2  # heads of the x, q, k given to rotate and scores


@dataclass
class Finding:
    """The worst element of one check at one call."""

    check: str  # inv_freq, attention_factor, tables, rotate, scores
    call: int  # index of the call in the case
    error: float  # the largest |got - want| of the check (relative for inv_freq and attention_factor)
    tolerance: float  # the bound at the element nearest its bound (the largest error/bound)
    ratio: float  # that element's error/bound (> 1: fails)
    where: str  # that element, in words


@dataclass
class Result:
    impl: str
    case: str
    status: str  # pass, fail, n/a, error
    detail: str = ""
    findings: list[Finding] = field(default_factory=list)

    @property
    def worst(self) -> Finding | None:
        return max(self.findings, key=lambda f: f.ratio) if self.findings else None

    @property
    def error(self) -> float | None:
        """The largest error of the check that came nearest its bound (or past it)."""
        return self.worst.error if self.worst else None

    def to_json(self) -> dict:
        w = self.worst
        return {"impl": self.impl, "case": self.case, "status": self.status, "detail": self.detail,
                "error": _finite(w.error) if w else None, "check": w.check if w else None,
                "tolerance": w.tolerance if w else None, "ratio": _finite(w.ratio) if w else None,
                "where": w.where if w else None,
                "findings": [{"check": f.check, "call": f.call, "error": _finite(f.error), "tolerance": f.tolerance,
                              "ratio": _finite(f.ratio), "where": f.where} for f in self.findings]}


def _finite(x: float) -> float | str:
    """JSON has no inf or NaN: those are written as strings."""
    return x if math.isfinite(x) else str(x)


def _first(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def check(adapter: Adapter, case: Case) -> Result:
    """``adapter`` on ``case``."""
    name = adapter.name
    for cfg in (case.config, case.twin):
        try:
            reason = adapter.supports(cfg) if cfg is not None else None
        except Exception as exc:  # an adapter's own code raises anything: an error cell, not a traceback
            return Result(name, case.name, "error", f"supports() raised {_first(exc)}")
        if reason:
            return Result(name, case.name, "n/a", reason)
    if case.refuse:
        return _refusal(adapter, case)
    ref = Reference(case.config)
    try:
        emb = adapter.build(case.config)
        twin = adapter.build(case.twin) if case.twin is not None else None
    except NotApplicable as exc:
        return Result(name, case.name, "n/a", str(exc))
    except Unanswered as exc:
        return Result(name, case.name, "error", f"no answer: {exc}")
    except Exception as exc:  # an adapter's runtime raises anything
        return Result(name, case.name, "error", f"refused a valid config: {_first(exc)}")
    offered = [c for c in case.checks if hasattr(emb, c) and (twin is None or hasattr(twin, c))]
    if not offered:
        return Result(name, case.name, "n/a", f"offers none of {', '.join(case.checks)}")
    gen = torch.Generator().manual_seed(zlib.crc32(case.name.encode()))
    findings: list[Finding] = []
    for i, call in enumerate(case.calls):
        pos = case.rows(i) if case.batch > 1 else torch.tensor(call, dtype=torch.long)
        for check in offered:
            try:
                findings += _compare(check, emb, twin, ref, case, pos, i, gen)
            except NotApplicable as exc:  # a call the runtime does not serve, by its own rule
                if any(f.ratio > 1 for f in findings):  # what it did serve differs: that stands
                    return _verdict(name, case, findings)
                return Result(name, case.name, "n/a", f"{check} at call {i + 1}: {exc}", findings)
            except Unanswered as exc:
                return Result(name, case.name, "error", f"{check} at call {i + 1}: no answer: {exc}", findings)
            except Exception as exc:
                return Result(name, case.name, "error", f"{check} at call {i + 1} raised {_first(exc)}", findings)
    return _verdict(name, case, findings)


def _verdict(name: str, case: Case, findings: list[Finding]) -> Result:
    """Pass or fail by the finding nearest its bound (or past it)."""
    worst = max(findings, key=lambda f: f.ratio)
    return Result(name, case.name, "pass" if worst.ratio <= 1 else "fail", _describe(worst, case), findings)


def _refusal(adapter: Adapter, case: Case) -> Result:
    """Passes when the runtime refuses the config; a side that could not be asked says nothing of it."""
    try:
        emb = adapter.build(case.config)
        pos = torch.tensor(case.calls[0], dtype=torch.long)
        for check in CHECKS:
            if hasattr(emb, check):
                _call(check, emb, pos, case, torch.Generator().manual_seed(0))
                break
    except NotApplicable as exc:
        return Result(adapter.name, case.name, "n/a", str(exc))
    except Unanswered as exc:
        return Result(adapter.name, case.name, "error", f"no answer: {exc}")
    except Exception as exc:
        return Result(adapter.name, case.name, "pass", f"refused: {_first(exc)}")
    return Result(adapter.name, case.name, "fail", f"accepted {case.config.describe()} (lexkit refuses it)")


def _inputs(case: Case, pos: Tensor, gen: torch.Generator, count: int) -> list[Tensor]:
    """``count`` inputs [H, n, h] (a batch's [B, H, n, h] for ``pos`` [B, n])."""
    shape = (*pos.shape[:-1], HEADS, pos.shape[-1], case.config.head_dim)
    return [torch.randn(shape, generator=gen, dtype=torch.float64).to(case.config.dtype) for _ in range(count)]


def _call(check: str, emb, pos: Tensor, case: Case, gen, inputs: list[Tensor] | None = None):
    """The embedding's answer for one check, as float64 tensors (and a float attention factor)."""
    if check == "frequencies":
        inv, a = emb.frequencies(pos)
        return torch.as_tensor(inv).to(torch.float64).flatten(), float(a)
    if check == "tables":
        cos, sin = emb.tables(pos)
        return torch.stack((torch.as_tensor(cos).to(torch.float64), torch.as_tensor(sin).to(torch.float64)))
    inputs = inputs if inputs is not None else _inputs(case, pos, gen, 1 if check == "rotate" else 2)
    if check == "rotate":
        return torch.as_tensor(emb.rotate(inputs[0], pos)).to(torch.float64)
    if check == "rotate_batch":
        return torch.as_tensor(emb.rotate_batch(inputs[0], pos)).to(torch.float64)
    return torch.as_tensor(emb.scores(inputs[0], inputs[1], pos)).to(torch.float64)


def _compare(check: str, emb, twin, ref: Reference, case: Case, pos: Tensor, call: int, gen) -> list[Finding]:
    dtype, r = case.config.dtype, ref.rot_dims
    if check == "rotate_batch":  # each row against the reference at its own positions
        inputs = _inputs(case, pos, gen, 1)
        got = _call(check, emb, pos, case, gen, inputs)
        want = torch.stack([ref.rotate(inputs[0][b], pos[b]) for b in range(len(pos))])
        bound = torch.stack([tolerance.rotate(inputs[0][b], pos[b], *ref.frequencies(pos[b]), r, dtype)
                             for b in range(len(pos))])
        return [_worst(check, call, got, want, bound,
                       lambda i: f"row {i[0]} (length {int(pos[i[0]].max()) + 1}) at position {int(pos[i[0], i[2]])}, "
                                 f"dim {i[3]}")]
    theta, a = ref.frequencies(pos)
    inputs = _inputs(case, pos, gen, {"frequencies": 0, "tables": 0, "rotate": 1, "scores": 2}[check])
    got = _call(check, emb, pos, case, gen, inputs)
    if twin is not None:  # a property: the implementation under the twin config, positions shifted
        want = _call(check, twin, pos + case.shift, case, gen, inputs)
        scale = 2.0  # both sides carry rounding
    else:
        want = {"frequencies": lambda: ref.frequencies(pos), "tables": lambda: torch.stack(ref.tables(pos)),
                "rotate": lambda: ref.rotate(inputs[0], pos),
                "scores": lambda: ref.scores(inputs[0], inputs[1], pos)}[check]()
        scale = 1.0
    far = pos if not case.shift else pos + case.shift
    if check == "frequencies":
        inv_bound = tolerance.frequencies(theta, dtype) * scale
        return [_worst("inv_freq", call, got[0], want[0], inv_bound, lambda i: f"pair {i[0]}", relative=True),
                _worst("attention_factor", call, torch.tensor([got[1]]), torch.tensor([float(want[1])]),
                       torch.tensor([tolerance.attention_factor(dtype) * scale]), lambda i: "a", relative=True)]
    if check == "tables":
        bound = tolerance.tables(torch.maximum(pos, far), theta, a, dtype).expand(2, -1, -1) * scale
        return [_worst("tables", call, got, want, bound,
                       lambda i: f"{'cos' if i[0] == 0 else 'sin'} at position {int(pos[i[1]])}, pair {i[2]}")]
    if check == "rotate":
        if case.config.pairs == "interleaved":  # the bound of each dim by its pair's frequency, in that layout
            bound = to_interleaved(tolerance.rotate(from_interleaved(inputs[0], r), torch.maximum(pos, far), theta, a,
                                                    r, dtype), r) * scale
        else:
            bound = tolerance.rotate(inputs[0], torch.maximum(pos, far), theta, a, r, dtype) * scale
        return [_worst("rotate", call, got, want, bound, lambda i: f"position {int(pos[i[1]])}, dim {i[2]}")]
    gain = ref.score_gain(pos)
    bound = tolerance.scores(inputs[0], inputs[1], torch.maximum(pos, far), theta, gain, dtype) * scale
    if case.within is not None:
        outside = (pos[:, None] - pos[None, :]).abs() >= case.within
        bound = bound.masked_fill(outside, math.inf)
    if case.causal:  # pairs a causal mask hides (m < n): the scheme defines no score there
        bound = bound.masked_fill(pos[:, None] < pos[None, :], math.inf)
    return [_worst("scores", call, got, want, bound,
                   lambda i: f"(m, n) = ({int(pos[i[1]])}, {int(pos[i[2]])})")]


def _worst(check: str, call: int, got: Tensor, want: Tensor, bound: Tensor, where, relative: bool = False) -> Finding:
    want = torch.as_tensor(want, dtype=torch.float64)
    if got.shape != want.shape:
        return Finding(check, call, math.inf, math.nan, math.inf,
                       f"shape {list(got.shape)}, the reference's {list(want.shape)}")
    diff = (got - want).abs()
    if relative:
        diff = diff / want.abs().clamp_min(1e-300)
    finite = torch.isfinite(got) & torch.isfinite(want)
    diff = torch.where(finite, diff, torch.full_like(diff, math.inf))  # NaN and inf fail
    keep = torch.isfinite(bound)
    if not bool(keep.any()):
        return Finding(check, call, 0.0, math.inf, 0.0, "nothing compared")
    ratio = torch.where(keep, diff / bound, torch.zeros_like(diff))
    flat = int(torch.argmax(ratio))
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), ratio.shape))
    error = float(torch.where(keep, diff, torch.zeros_like(diff)).max())
    return Finding(check, call, error, float(bound[index]), float(ratio[index]), where(index))


def _describe(f: Finding, case: Case) -> str:
    call = f" at call {f.call + 1} (length {max(case.calls[f.call]) + 1})" if len(case.calls) > 1 else ""
    if not math.isfinite(f.tolerance):
        return f"{f.check}{call}: {f.where}"
    return (f"{f.check}{call}: largest error {f.error:.2g}; nearest its bound at {f.where}, "
            f"{f.ratio * f.tolerance:.2g} against {f.tolerance:.2g}")


def run(adapters: list[Adapter], cases: list[Case]) -> list[Result]:
    """Every adapter on every case, adapter by adapter (each closed after its cases)."""
    out = []
    for adapter in adapters:
        try:
            out += [check(adapter, case) for case in cases]
        finally:
            adapter.close()
    return out
