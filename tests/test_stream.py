"""Streaming: a sequence fed in segments through the KV cache (what it keeps: test_cache.py) gives
the one-pass losses (float32, within 1e-5) for every scheme under window and bca, at lengths that
are not multiples of the segment or W, with an offset, and for xPos far past its max_query_span.
`evaluate(stream=...)` and `lexkit eval --stream/--no-stream`."""

from __future__ import annotations

import functools
import json
import math

import pytest
import torch
import torch.nn.functional as F

import lexkit
from cli_checks import one_error_line, save_run
from kit import tiny_gpt
from lexkit import positions
from lexkit.cli import main
from lexkit.evaluate import evaluate, stream_nll
from schemes_under_test import fast_one_of_each_kind

SCHEMES = positions.names()
LOCAL = ["window:12", "bca:12"]  # bca:12 has blocks of 6

#: the kit's model, every head of its scheme different, its tables 4,096 positions long
tiny = functools.partial(tiny_gpt, max_len=4096, spread=True)


def one_pass_nll(model, x, y, pattern, offset=0, kernel="dense"):
    """Per-token NLL [b, n] of one forward pass over the whole input (the reference)."""
    logits = model(x, pattern=pattern, offset=offset, kernel=kernel)
    return F.cross_entropy(logits.double().flatten(0, 1), y.flatten(), reduction="none").view(y.shape)


def inputs(n: int, b: int = 2, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 256, (b, n + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


# -- exactness ------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", fast_one_of_each_kind(SCHEMES))
def test_streamed_losses_equal_one_pass_for_every_scheme(scheme):
    """157 tokens in segments of 40 (157 is no multiple of 40, 12 or 6), from position 500; and the first 16
    (past W = 12, and no multiple of 12 or 6) one token at a time."""
    model = tiny(scheme)
    x, y = inputs(157)
    with torch.inference_mode():
        for spec in LOCAL + ["causal"]:
            pat = model.pattern(spec)
            ref = one_pass_nll(model, x, y, pat, offset=500)
            got = stream_nll(model, x, y, pat, segment=40, offset=500)
            assert got.dtype == torch.float64 and got.shape == (2, 157)
            assert (got - ref).abs().max() <= 1e-5, (scheme, spec)
            one_token = stream_nll(model, x[:, :16], y[:, :16], pat, segment=1, offset=500)
            assert (one_token - ref[:, :16]).abs().max() <= 1e-5, (scheme, spec)


@pytest.mark.parametrize("spec", LOCAL)
def test_xpos_far_past_its_query_span_is_finite_and_translation_invariant(spec):
    """xPos with B = 4 has max_query_span 95; 500 tokens from position 10^7 stream exactly as
    the one-pass chunked kernel, and (scores depend on m - n only) as the same tokens at 0."""
    model = tiny("xpos:scale_base=4")
    assert model.scheme.max_query_span < 100
    x, y = inputs(500, b=1)
    pat = model.pattern(spec)
    with torch.inference_mode():
        far = stream_nll(model, x, y, pat, segment=128, offset=10**7)
        ref = one_pass_nll(model, x, y, pat, offset=10**7, kernel="chunked")
        near = one_pass_nll(model, x, y, pat, offset=0, kernel="chunked")
    assert torch.isfinite(far).all()
    assert (far - ref).abs().max() <= 1e-5
    assert (far - near).abs().max() <= 1e-5


# -- evaluate(stream=...) -------------------------------------------------------------------
def test_evaluate_streamed_equals_one_pass_and_auto_streams_only_when_it_saves_memory():
    model = tiny("kerple-log")
    doc = bytes((7 * i * i + 3 * i) % 256 for i in range(700))
    kw = dict(lengths=[100, 233], pattern=["window:12", "bca:12", "causal"], segment=64)
    one = evaluate(model, [doc, doc[::-1]], stream=False, **kw)
    streamed = evaluate(model, [doc, doc[::-1]], stream=True, **kw)
    auto = evaluate(model, [doc, doc[::-1]], **kw)
    for a, b in zip(one["results"], streamed["results"]):
        assert (a["length"], a["pattern"], a["bytes"]) == (b["length"], b["pattern"], b["bytes"])
        assert not a["streamed"] and b["streamed"]
        assert abs(a["bpb"] - b["bpb"]) <= 1e-6
    for a, b in zip(one["by_position"], streamed["by_position"]):
        assert (a["from"], a["to"], a["bytes"]) == (b["from"], b["to"], b["bytes"]) and abs(a["bpb"] - b["bpb"]) <= 1e-6
    assert {(r["length"], r["pattern"]): r["streamed"] for r in auto["results"]} == {
        (100, "window:12"): True, (100, "bca:12"): True, (100, "causal"): False,  # longer than a segment, local
        (233, "window:12"): True, (233, "bca:12"): True, (233, "causal"): False,
    }
    short = evaluate(model, [doc], lengths=[64], pattern="window:12", segment=64)
    assert short["results"][0]["streamed"] is False  # one segment: nothing to save


def test_evaluate_streamed_learned_past_its_table_is_unavailable_as_in_one_pass():
    model = tiny("learned", max_len=None)  # table of 16 positions
    doc = bytes(range(200))
    for stream in (False, True):
        out = evaluate(model, [doc], [16, 64], "window:8", stream=stream, segment=16)
        cells = {r["length"]: r for r in out["results"]}
        assert cells[16]["bpb"] is not None and cells[64]["bpb"] is None
        assert "learned positions cover 0..15" in cells[64]["unavailable"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(stream="yes"), "stream must be 'auto', True or False"),
    (dict(stream=True, kernel="dense"), "cannot stream .*kernel 'dense' cannot run through a KV cache"),
    (dict(segment=0), "segment must be a positive integer"),
])
def test_evaluate_bad_stream_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        evaluate(tiny("rope"), [bytes(100)], [32], "window:8", **kwargs)


def test_a_model_without_a_cache_evaluates_in_one_pass_and_refuses_forced_streaming():
    class NoCache(torch.nn.Module):  # the GPT call signature, uniform logits, no new_cache
        def __init__(self):
            super().__init__()
            self.cfg, self.dummy = lexkit.ModelConfig(train_len=8), torch.nn.Parameter(torch.zeros(()))

        def forward(self, tokens, pattern="causal", offset=0, *, kernel="auto", hook=None):
            return torch.zeros(*tokens.shape, 257)

    out = evaluate(NoCache(), [bytes(100)], [64], "window:8", segment=16)
    assert out["results"][0]["streamed"] is False and abs(out["results"][0]["bpb"] - math.log2(257)) < 1e-12
    with pytest.raises(ValueError, match="needs a model with a KV cache"):
        evaluate(NoCache(), [bytes(100)], [64], "window:8", stream=True)


# -- lexkit eval --stream ---------------------------------------------------------------------
def test_cli_eval_stream_flags(tmp_path, capsys):
    run = save_run(tmp_path, tiny("alibi"))
    data = tmp_path / "doc.txt"
    data.write_bytes(bytes((5 * i) % 251 for i in range(5000)))
    base = ["eval", str(run), "--data", str(data), "--lengths", "4500", "--pattern", "window:12", "--no-progress"]
    reports = {}
    for flag in ("--stream", "--no-stream", None):
        out = tmp_path / f"{flag}.json"
        assert main(base + ([flag] if flag else []) + ["--json", str(out)]) == 0
        capsys.readouterr()
        reports[flag] = json.loads(out.read_text())
    assert reports["--stream"]["stream"] is True and reports["--no-stream"]["stream"] is False
    assert reports[None]["stream"] == "auto" and reports[None]["results"][0]["streamed"] is True  # 4500 > 4096
    assert reports["--no-stream"]["results"][0]["streamed"] is False
    assert abs(reports["--stream"]["results"][0]["bpb"] - reports["--no-stream"]["results"][0]["bpb"]) <= 1e-6
    assert main(base + ["--stream", "--kernel", "dense"]) == 2
    line = one_error_line(capsys)
    assert "--stream" in line and "kernel 'dense' cannot run through a KV cache" in line


# -- streaming and the context-extension options ------------------------------------------------
@pytest.mark.parametrize("scheme", ["rope", "alibi", "rerope:w=6,k=4", "rope:scaling=yarn,factor=4"])
def test_streaming_with_logn_and_sinks_equals_one_pass(scheme):
    """Log-n scales each query by its absolute position (offset included) and sinks:12,K=3 keeps
    its first keys beside the window: both stream exactly (segments of 40, 157 tokens)."""
    model = tiny(scheme)
    model.cfg.logn = True
    x, y = inputs(157)
    with torch.inference_mode():
        for spec in ["window:12", "sinks:12,K=3", "causal"]:
            pat = model.pattern(spec)
            ref = one_pass_nll(model, x, y, pat, offset=500, kernel="chunked")
            got = stream_nll(model, x, y, pat, segment=40, offset=500)
            assert (got - ref).abs().max() <= 1e-5, (scheme, spec)
    model.cfg.logn = False
    with torch.inference_mode():  # log-n really changed the losses (the comparison can fail)
        plain = one_pass_nll(model, x, y, model.pattern("window:12"), offset=500, kernel="chunked")
    assert (plain - ref).abs().max() > 1e-4


