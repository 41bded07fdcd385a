"""One runtime on one model case -> a :class:`ModelResult`: per check, the first position where the
runtime leaves the band, its worst error there and everywhere, and greedy agreement.

The checks of a case (ids: seeded by the case's name, uniform over the vocabulary):

* ``prefill@N``: logits at every position of one forward pass of N tokens, N = L and 32·L;
* ``batch@32L`` and ``batch@L/2``: where the runtime batches (``batch(seqs)``), a sequence of 32·L beside
  one of L/2 in one forward pass, each against its own prefill;
* ``decode/1`` and ``decode/3``: the runtime's own KV cache, after a prefill of ``start`` tokens, fed one
  token a step and three, over segments across the window (where the model has one), across L and at
  32·L. The reference of position t is the prefill's logits at t (decode is prefill), except where a
  layer's RoPE reads the current length (dynamic NTK, LongRoPE): there no cache can be a prefill (its
  keys were rotated at the length of the pass that wrote them), and the reference is a cache's, each
  key rotated once at the length of the forward pass that wrote it (transformers' ``dynamic_rope_update``).

The band is the float32 arithmetic of a faithful runtime, measured on the reference itself: lexkit's
float32 decoder (angles and tables in float32, as runtimes compute them) against its float64 one on
the longest prefill, times :data:`MARGIN`, plus a floor of :data:`FLOOR` times the logits' scale. The
margin is wide enough for float32 done another way (llama.cpp, faithful, measured 1.45e-4 at 2,048
positions where transformers' float32 is 1.5e-5: ggml forms θ_i by repeated multiplication, i roundings)
and narrow enough that every planted bug is far past it (the smallest, a Llama 3 scaling dropped, 0.006
at position 1: over 20 bands).
"""

from __future__ import annotations

import dataclasses
import json
import math
import zlib
from pathlib import Path

import torch

from ..adapter import NotApplicable, Unanswered
from . import forward
from .cases import ModelCase
from .checkpoint import checkpoint

MARGIN = 32.0  # times the float32 decoder's largest error
FLOOR = 1e-6  # times the largest |logit|
SEGMENT = 9  # positions of a decode segment (three 3-token steps)
STEPS = (1, 3)  # tokens a decode step
VERSION = 3  # of the reference's cached logits (DIR.reference-vN.safetensors): raised when what they hold changes


@dataclasses.dataclass
class Check:
    """One check's outcome."""

    check: str  # prefill@N, decode/1, decode/3
    positions: int  # the positions compared
    error: float  # the largest |got - want|
    band: float
    first: int | None  # the first position past the band (None: none)
    first_error: float | None  # the error there
    agree: float  # greedy agreement: the fraction of positions whose argmax is the reference's

    @property
    def ok(self) -> bool:
        return self.first is None

    def text(self) -> str:
        if self.ok:
            return f"{self.check}: within {self.band:.2g} (largest {self.error:.2g}), greedy {self.agree:.0%}"
        return (f"{self.check}: leaves the band at position {self.first} ({self.first_error:.2g} against "
                f"{self.band:.2g}), largest {self.error:.2g}, greedy {self.agree:.0%}")


@dataclasses.dataclass
class ModelResult:
    runtime: str
    case: str
    status: str  # pass, fail, n/a, error
    detail: str = ""
    checks: list[Check] = dataclasses.field(default_factory=list)
    read: dict | None = None  # what the runtime read from the config, where it shows it

    @property
    def impl(self) -> str:  # the name the accepted-differences file and the report read
        return self.runtime

    @property
    def worst(self) -> Check | None:
        bad = [c for c in self.checks if not c.ok]
        return min(bad, key=lambda c: c.first) if bad else max(self.checks, key=lambda c: c.error / c.band,
                                                                   default=None)

    def to_json(self) -> dict:
        return {"runtime": self.runtime, "case": self.case, "status": self.status, "detail": self.detail,
                "checks": [dataclasses.asdict(c) for c in self.checks], "read": self.read}


def ids_of(case: ModelCase, salt: str = "") -> torch.Tensor:
    """The case's token ids, 32·L of them, seeded by its name (and ``salt``: the batch's second sequence)."""
    gen = torch.Generator().manual_seed(zlib.crc32((case.name + salt).encode()))
    return torch.randint(0, case.hf_config["vocab_size"], (max(case.lengths),), generator=gen)


def batch_ids(case: ModelCase) -> list[torch.Tensor]:
    """The batch check's sequences: the case's 32·L ids and L/2 other ones (below L: a runtime that reads one
    length for the batch scales the short one by the long one's)."""
    return [ids_of(case), ids_of(case, "/batch")[: case.original // 2]]


def segments(case: ModelCase) -> list[int]:
    """Where decode segments start: across the window (if any), across L, and at 32·L."""
    n, L = max(case.lengths), case.original
    starts = [case.window - 4] if case.window else []
    return [max(s, 1) for s in starts + [L - 4]] + [n - SEGMENT]


def length_dependent(config: dict) -> bool:
    """Whether a layer's RoPE reads the current length (dynamic NTK, LongRoPE)."""
    return any(layer.rope is not None and layer.rope.scaling in ("dynamic", "longrope")
               for layer in forward.decoder_layers(config))


class Reference:
    """A case's float64 logits (cached beside its checkpoint directory, with the float32 decoder's drift and
    the logits' scale, from which the band is computed) and its band."""

    def __init__(self, case: ModelCase, directory: Path) -> None:
        self.case, self.directory = case, directory
        config, weights = forward.read(directory)
        self.config, self.weights = config, weights
        self.ids = ids_of(case)
        # beside the checkpoint, not in it: a runtime's loader reads every *.safetensors of its directory
        cached = directory.with_name(f"{directory.name}.reference-v{VERSION}.safetensors")
        crc = str(zlib.crc32(self.ids.numpy().tobytes()))
        meta = None
        if cached.is_file():
            from safetensors import safe_open

            with safe_open(str(cached), framework="pt") as f:
                meta = f.metadata()
                self.logits = {k: f.get_tensor(k) for k in f.keys()}
        if meta is None or meta.get("ids") != crc:  # none yet, or of other ids
            from safetensors.torch import save_file

            self.logits, meta = self._compute()
            meta["ids"] = crc
            save_file(self.logits, str(cached), metadata=meta)
        self.drift, self.scale = float(meta["drift"]), float(meta["scale"])
        self.band = MARGIN * self.drift + FLOOR * self.scale

    def _compute(self) -> dict:
        f64 = forward.Decoder(self.config, self.weights)
        f32 = forward.Decoder(self.config, self.weights, torch.float32)
        out = {}
        for n in self.case.lengths:
            out[f"prefill@{n}"] = f64.prefill(self.ids[:n])
        short = batch_ids(self.case)[1]
        out[f"batch@{len(short)}"] = f64.prefill(short)
        longest = max(self.case.lengths)
        drift = float((f32.prefill(self.ids[:longest]).double() - out[f"prefill@{longest}"]).abs().max())
        scale = float(out[f"prefill@{longest}"].abs().max())
        dependent = length_dependent(self.config)
        for start in segments(self.case):
            stop = start + SEGMENT
            for k in STEPS:
                if dependent:  # a cache's: each key rotated once, at the length of the pass that wrote it
                    session = f64.session()
                    session.feed(self.ids[:start])
                    rows = [session.feed(self.ids[at:min(at + k, stop)]) for at in range(start, stop, k)]
                    out[f"decode@{start}/{k}"] = torch.cat(rows)
                else:  # decode is prefill: a causal model's logits at t do not depend on what follows
                    out[f"decode@{start}/{k}"] = out[f"prefill@{longest}"][start:stop]
        return {k: v.clone().contiguous() for k, v in out.items()}, {"drift": repr(drift), "scale": repr(scale)}


def _compare(check: str, got, want: torch.Tensor, band: float, offset: int = 0) -> Check:
    got = torch.as_tensor(got).to(torch.float64)
    if got.shape != want.shape:
        return Check(check, want.shape[0], math.inf, band, offset, math.inf, 0.0)
    diff = (got - want).abs()
    diff = torch.where(torch.isfinite(diff), diff, torch.full_like(diff, math.inf))
    per = diff.amax(-1)  # [n]
    bad = torch.nonzero(per > band)
    first = int(bad[0]) if len(bad) else None
    agree = float((got.argmax(-1) == want.argmax(-1)).double().mean())
    return Check(check, len(per), float(per.max()), band, None if first is None else first + offset,
                 None if first is None else float(per[first]), agree)


def check(runtime, case: ModelCase, root: Path | None = None) -> ModelResult:
    """``runtime`` on ``case`` (its checkpoint made or read from ``root``)."""
    name = runtime.name
    try:
        reason = runtime.supports(case)
    except Exception as exc:  # a runtime's own code raises anything
        return ModelResult(name, case.name, "error", f"supports() raised {type(exc).__name__}: {exc}")
    if reason:
        return ModelResult(name, case.name, "n/a", reason)
    directory = checkpoint(case, root)
    ref = Reference(case, directory)
    try:
        model = runtime.load(directory, case)
    except NotApplicable as exc:
        return ModelResult(name, case.name, "n/a", str(exc))
    except Unanswered as exc:
        return ModelResult(name, case.name, "error", f"no answer: {exc}")
    except Exception as exc:
        return ModelResult(name, case.name, "error", f"load failed: {type(exc).__name__}: {_first(exc)}")
    checks: list[Check] = []
    try:
        read = model.read() if hasattr(model, "read") else None
    except Exception as exc:  # what a runtime shows of itself is a note, not a verdict
        read = {"error": f"{type(exc).__name__}: {_first(exc)}"}
    steps = [(f"prefill@{n}", n, None) for n in case.lengths]
    steps += [(f"decode/{k}", start, k) for k in STEPS for start in segments(case)]
    for label, at, step in steps:
        try:
            if step is None:
                checks.append(_compare(label, model.prefill(ref.ids[:at]), ref.logits[label], ref.band))
            else:
                got = model.decode(ref.ids[:at + SEGMENT], at, step)
                checks.append(_compare(label, got, ref.logits[f"decode@{at}/{step}"], ref.band, at))
        except NotApplicable as exc:
            return ModelResult(name, case.name, "n/a", f"{label}: {exc}", checks)
        except Unanswered as exc:
            return ModelResult(name, case.name, "error", f"{label}: no answer: {exc}", checks)
        except Exception as exc:
            return ModelResult(name, case.name, "error", f"{label} raised {type(exc).__name__}: {_first(exc)}", checks)
    if hasattr(model, "batch"):  # the runtime batches: each sequence against its own prefill
        seqs = batch_ids(case)
        try:
            rows = model.batch(seqs)
        except Exception as exc:
            return ModelResult(name, case.name, "error", f"batch raised {type(exc).__name__}: {_first(exc)}", checks)
        for seq, got in zip(seqs, rows):
            key = f"prefill@{len(seq)}" if len(seq) == max(case.lengths) else f"batch@{len(seq)}"
            checks.append(_compare(f"batch@{len(seq)}", got, ref.logits[key], ref.band))
    merged = _merge(checks)
    bad = [c for c in merged if not c.ok]
    status = "fail" if bad else "pass"
    detail = "; ".join(c.text() for c in (bad or [max(merged, key=lambda c: c.error / c.band)]))
    if bad and read:  # what the runtime read beside what it got wrong
        detail += f"; it read {json.dumps(read, sort_keys=True, default=str)}"
    return ModelResult(name, case.name, status, detail, merged, read)


def _merge(checks: list[Check]) -> list[Check]:
    """The decode segments of one step size as one check (the first bad position over all of them)."""
    out: dict[str, Check] = {}
    for c in checks:
        seen = out.get(c.check)
        if seen is None:
            out[c.check] = dataclasses.replace(c)
            continue
        total = seen.positions + c.positions
        first = seen if seen.first is not None else c
        out[c.check] = Check(c.check, total, max(seen.error, c.error), c.band, first.first, first.first_error,
                             (seen.agree * seen.positions + c.agree * c.positions) / total)
    return list(out.values())


def _first(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""


def run(runtimes: list, cases: list[ModelCase], root: Path | None = None) -> list[ModelResult]:
    """Every runtime on every case, runtime by runtime (each closed after its cases)."""
    out = []
    for runtime in runtimes:
        try:
            out += [check(runtime, case, root) for case in cases]
        finally:
            runtime.close()
    return out
