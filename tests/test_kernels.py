"""The three kernels (dense, chunked, FlexAttention) against the float64 reference path, the flex
ladder under injected kernel failures, and the ``auto`` choice.

Compiled FlexAttention is refused on the CPU (it returned wrong numbers or NaN at some lengths and
head dims with torch 2.13, docs/kernels.md): here every (scheme, pattern) runs through *eager*
flex (the same score_mod, block mask and query blocks, unfused; the ``eager_flex`` fixture lifts
the refusal for this reference path), forward and backward. Compiled flex is tested on CUDA
(test_gpu.py and the ``gpu`` test below). Long inputs and full grids are marked slow, each beside
a fast sibling on the same code path.
"""

from __future__ import annotations

import copy
import functools
import math
import warnings

import pytest
import torch

from kit import rel, tiny_gpt
from lexkit import GPT, attention, positions
from lexkit.attention import Attention, choose_kernel, kernels
from oracle import reference_attention
from schemes_under_test import TEN

PATTERNS = ["causal", "window:64", "bca:64", "sinks:64", "chunk:64"]  # sinks: K=4 first keys + a window of 64
H, HD = 2, 16
N = 257  # the one length of the fast flex tests: three 128-tiles, the last one partial
TOL = 1e-5  # fp32 against the float64 reference: max |difference| of outputs and input gradients
PARAM_RTOL = 5e-5  # ... of a learnable bias parameter's gradient, relative (see assert_parity)


def scheme(spec: str, n_heads: int = H, head_dim: int = HD):
    s = positions.create(spec, n_heads=n_heads, head_dim=head_dim, max_len=4096)
    if hasattr(s, "table") and spec == "t5":  # make the learned T5 bias large enough to matter
        with torch.no_grad():
            s.table.normal_(0, 1.0)
    return s


def qkv(n: int, dtype=torch.float32, batch: int = 2):
    return tuple(torch.randn(batch, H, n, HD, dtype=dtype) for _ in range(3))


def err(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.detach().double() - want.detach().double()).abs().max())


def check_all_kernels(specs, pattern_spec: str, n: int, offset: int = 5, kernel_names=("dense", "chunked", "flex")):
    """Each kernel's forward output within 1e-4 of max|output| of the float64 reference."""
    pattern = attention.create(pattern_spec)
    pos = torch.arange(offset, offset + n)
    for spec in specs:
        s = scheme(spec)
        q, k, v = qkv(n)
        with torch.no_grad():
            want = reference_attention(q.double(), k.double(), v.double(), s, pattern, pos)
            for kernel in kernel_names:
                att = Attention(s, pattern, pos, kernel=kernel)
                assert att.kernel == kernel
                got = att(q, k, v)
                assert got.shape == want.shape and got.dtype == torch.float32
                assert rel(got, want) <= 1e-4, (spec, pattern_spec, n, kernel, rel(got, want))
                assert err(got, want) <= TOL, (spec, pattern_spec, n, kernel, err(got, want))


# -- reference path is what it claims to be -----------------------------------------------------
def test_reference_attention_is_softmax_of_masked_scores():
    s, p = scheme("alibi"), attention.create("window:3")
    q, k, v = qkv(6, torch.float64, batch=1)
    pos = torch.arange(6)
    out = reference_attention(q, k, v, s, p, pos)
    slopes = s.slopes.double()
    for hh in range(H):
        for m in range(6):
            keys = [j for j in range(6) if 0 <= m - j < 3]
            e = torch.stack([q[0, hh, m] @ k[0, hh, j] / math.sqrt(HD) - slopes[hh] * (m - j) for j in keys])
            w = torch.softmax(e, 0)
            want = sum(w[i] * v[0, hh, j] for i, j in enumerate(keys))
            assert torch.allclose(out[0, hh, m], want, atol=1e-6)


# -- dense == chunked == reference; flex (compiled, eager) == reference ----------------------------
@pytest.mark.parametrize("pattern_spec", PATTERNS)
def test_dense_and_chunked_agree_with_reference(pattern_spec, monkeypatch):
    """130 queries in chunked blocks of 64 (64 + 64 + 2: every pattern's reach of 64 crosses a block edge, the
    last block partial), a third of the float64 work of N; the chunked kernel at its own CHUNK of 256 is
    test_chunked_equals_dense_with_gradients_at_300's."""
    monkeypatch.setattr(kernels.step, "CHUNK", 64)
    check_all_kernels(TEN, pattern_spec, 130, kernel_names=("dense", "chunked"))


class Decided(dict):
    """FLEX_DECISIONS that holds a decision (rung 0) for every key: no probe backward."""

    def __contains__(self, key) -> bool:
        return True

    def get(self, key, default=None):
        return 0


def flex_parity(spec: str, pattern_spec: str, n: int = N, offset: int = 5, prepare=None) -> dict:
    """Eager flex forward and backward (inputs and the scheme's learnable parameters) against the
    float64 reference with the same output gradient; returns the max errors. ``prepare(scheme)``
    may set its parameters first."""
    s, pattern = scheme(spec), attention.create(pattern_spec)
    if prepare is not None:
        with torch.no_grad():
            prepare(s)
    ref = copy.deepcopy(s).double()
    pos = torch.arange(offset, offset + n)
    base, grad_out = qkv(n), torch.randn(2, H, n, HD)
    q, k, v = (t.clone().requires_grad_(True) for t in base)
    out = Attention(s, pattern, pos, kernel="flex")(q, k, v)
    (out * grad_out).sum().backward()
    rq, rk, rv = (t.double().requires_grad_(True) for t in base)
    want = reference_attention(rq, rk, rv, ref, pattern, pos)
    (want * grad_out.double()).sum().backward()
    params = [name for name, _ in s.named_parameters()] if s.has_bias else []
    errors = {"out": err(out, want)}
    for name, got, exp in [("q", q, rq), ("k", k, rk), ("v", v, rv)]:
        errors[name] = err(got.grad, exp.grad)
    for name in params:
        got, exp = dict(s.named_parameters())[name].grad, dict(ref.named_parameters())[name].grad
        assert got is not None and exp is not None and exp.abs().sum() > 0, (spec, name)
        errors[name] = err(got, exp) / float(exp.abs().max())
    return errors


def assert_parity(errors: dict, case) -> None:
    """Outputs and input gradients within TOL; a bias parameter's gradient (a float32 sum over
    batch x heads x n^2 scores: about 1e-6 relative on the dense path, up to 1.2e-5 through torch's
    eager flex backward, which accumulates the captured tensors' gradient in another order) within
    PARAM_RTOL of its largest element."""
    inputs = {k: e for k, e in errors.items() if k in ("out", "q", "k", "v")}
    params = {k: e for k, e in errors.items() if k not in inputs}
    assert max(inputs.values()) <= TOL and max(params.values(), default=0.0) <= PARAM_RTOL, (case, errors)


#: the fast cover: every mask kind once, and the score_mods of the learnable biases, with gradients through the
#: bias's captured parameters. Each entry costs a dynamo trace of eager flex (0.2-0.5 s): rope stands for the
#: schemes without a score_mod (q and k transformed, or not, before the kernel: partial RoPE's rotation too);
#: causal is test_flex_xpos_recentres_query_blocks_past_its_span's (against float64) and
#: test_ladder_trains_like_dense_and_keeps_its_decision's (training). The fixed biases' score_mods run on flex in
#: the fast suite forward: ALiBi's in test_layer_modifiers.py's test_sit_and_a_soft_cap_run_in_flex_score_mod,
#: Sandwich's in test_context.py's test_logn_on_flex_run_eagerly_equals_the_reference; their inputs' gradients
#: (the same path as the kerple cases', a bias of the distance added to the score) are the slow grid's below
FAST_EAGER = [("kerple-power", "sinks:64"), ("kerple-log", "window:64"), ("t5", "bca:64"), ("rope", "chunk:48")]


@pytest.mark.parametrize("spec, pattern_spec", FAST_EAGER)
def test_eager_flex_forward_and_gradients_match_reference(eager_flex, monkeypatch, spec, pattern_spec):
    monkeypatch.setattr(kernels.flex, "FLEX_DECISIONS", Decided())
    assert_parity(flex_parity(spec, pattern_spec), (spec, pattern_spec))


# fast sibling: test_eager_flex_forward_and_gradients_match_reference (FAST_EAGER's comment names where each
# scheme's score_mod and each mask runs on flex in the fast suite)
@pytest.mark.slow
@pytest.mark.parametrize("pattern_spec", PATTERNS)
@pytest.mark.parametrize("spec", TEN)
def test_eager_flex_forward_and_gradients_every_scheme_every_pattern(eager_flex, monkeypatch, spec, pattern_spec):
    monkeypatch.setattr(kernels.flex, "FLEX_DECISIONS", Decided())
    assert_parity(flex_parity(spec, pattern_spec), (spec, pattern_spec))


@pytest.mark.slow
@pytest.mark.parametrize("n", [64, 1024])
@pytest.mark.parametrize("pattern_spec", PATTERNS[:3])
def test_kernels_agree_rope_alibi_at_64_and_1024(eager_flex, pattern_spec, n):
    check_all_kernels(["rope", "alibi"], pattern_spec, n)


def test_flex_raises_the_recompile_limit(monkeypatch):
    """compiled_flex raises dynamo's recompile limit from torch's default before it compiles, and compiles
    once per process. torch.compile is recorded here, not run: building Inductor's wrapper imports about 200
    modules (0.9 s), and compiled flex itself runs in the GPU lane (test_gpu.py)."""
    import torch._dynamo
    from torch.nn.attention.flex_attention import flex_attention

    config = torch._dynamo.config
    names = [name for name in ("cache_size_limit", "recompile_limit") if hasattr(config, name)]
    for name in names:  # torch's default, put back after the test
        monkeypatch.setattr(config, name, 8)
    calls = []

    def compile_(fn, **kw):
        calls.append((fn, kw, [getattr(config, name) for name in names]))
        return "compiled"

    monkeypatch.setattr(kernels.flex, "_FLEX", None)
    monkeypatch.setattr(torch, "compile", compile_)
    assert kernels.compiled_flex() == "compiled" and kernels.compiled_flex() == "compiled"
    assert len(calls) == 1 and calls[0][0] is flex_attention and calls[0][1] == {"dynamic": False}
    limits = calls[0][2]  # raised before the compile
    assert names and all(limit >= 256 for limit in limits)
    assert all(getattr(config, name) >= 256 for name in names)


# -- chunked == dense, with gradients --------------------------------------------------------------
@pytest.mark.parametrize("pattern_spec, specs", [
    ("causal", ["none", "rope", "kerple-power", "t5"]),
    ("window:64", ["sinusoidal", "xpos", "alibi"]),
    ("bca:64", ["learned", "kerple-log", "sandwich"]),
])
def test_chunked_equals_dense_with_gradients_at_300(pattern_spec, specs):
    """Fast sibling of the 600 case: two chunks (256 + 44 queries), each scheme under one pattern."""
    chunked_equals_dense_with_gradients(pattern_spec, 300, specs)


@pytest.mark.slow
@pytest.mark.parametrize("pattern_spec", PATTERNS)
def test_chunked_equals_dense_with_gradients_at_600(pattern_spec):
    chunked_equals_dense_with_gradients(pattern_spec, 600, TEN)  # three chunks of 256, the last partial


def chunked_equals_dense_with_gradients(pattern_spec: str, n: int, specs) -> None:
    assert kernels.step.CHUNK < n < 3 * kernels.step.CHUNK
    pattern = attention.create(pattern_spec)
    pos = torch.arange(n) + 11
    for spec in specs:
        s = scheme(spec)
        base = qkv(n, batch=1)
        grad_out = torch.randn(1, H, n, HD)
        results = {}
        for kernel in ("dense", "chunked"):
            q, k, v = (t.clone().requires_grad_(True) for t in base)
            s.zero_grad()
            att = Attention(s, pattern, pos, kernel=kernel, training=True)
            assert att.kernel == kernel
            out = att(q, k, v)
            (out * grad_out).sum().backward()
            bias_params = list(s.parameters()) if s.has_bias else []  # embeddings are not used here
            grads = [q.grad, k.grad, v.grad] + [p.grad.clone() for p in bias_params]
            results[kernel] = (out.detach(), grads)
        out_d, grads_d = results["dense"]
        out_c, grads_c = results["chunked"]
        assert rel(out_c, out_d) <= 1e-4, spec
        assert len(grads_d) == 3 + (len(list(s.parameters())) if s.has_bias else 0)
        for gd, gc in zip(grads_d, grads_c):
            assert gd is not None and gc is not None and torch.isfinite(gc).all(), spec
            assert rel(gc, gd) <= 1e-4, (spec, pattern_spec)
        if spec in ("kerple-power", "kerple-log", "t5"):
            assert all(g.abs().sum() > 0 for g in grads_d[3:]), spec  # the bias params learn


# -- kernel choice and its errors --------------------------------------------------------------------
def test_kernel_choice_and_refusals():
    rope, causal = scheme("rope"), attention.create("causal")
    cpu = torch.device("cpu")
    assert choose_kernel("auto", rope, causal, 512, cpu, training=True, hooked=False) == "dense"
    assert choose_kernel("auto", rope, causal, kernels.DENSE_MAX, cpu, training=False, hooked=False) == "dense"
    assert choose_kernel("auto", rope, causal, kernels.DENSE_MAX + 1, cpu, training=False, hooked=False) == "chunked"
    assert choose_kernel("auto", rope, causal, 16, cpu, training=False, hooked=True) == "chunked"
    with pytest.raises(ValueError, match="unknown kernel 'fast'"):
        Attention(rope, causal, torch.arange(4), kernel="fast")
    with pytest.raises(ValueError, match="no backward on CPU"):
        choose_kernel("flex", rope, causal, 64, cpu, training=True, hooked=False)
    with pytest.raises(ValueError, match="hook"):
        choose_kernel("dense", rope, causal, 64, cpu, training=False, hooked=True)


def test_compiled_flex_is_refused_on_the_cpu(tmp_path, capsys, trained):
    """A forced --kernel flex on the CPU gave wrong numbers or NaN, silently (compiled flex, torch
    2.13: 5.2706 against 5.2580 bpb): refused by the kernel choice, so by every forward, and by
    the commands before a model loads; auto never picks it there."""
    from lexkit.cli import main

    rope, causal = scheme("rope"), attention.create("causal")
    message = "kernel 'flex' runs on CUDA only: compiled FlexAttention on the CPU returns wrong numbers"
    with pytest.raises(ValueError, match=message):
        choose_kernel("flex", rope, causal, 40, "cpu", training=False, hooked=False)
    with pytest.raises(ValueError, match=message):
        tiny_gpt("rope", n_layers=1, d_model=16, train_len=16)(torch.randint(0, 256, (1, 40)), kernel="flex")
    assert choose_kernel("flex", rope, causal, 40, "cuda", training=True, hooked=False) == "flex"
    run = str(trained / "rope")
    for argv in (["eval", run, "--lengths", "40"], ["retrieval", run, "--task", "copy", "--lengths", "40"],
                 ["sample", run, "--prompt", "x", "--bytes", "4"]):
        assert main([*argv, "--kernel", "flex", "--json" if argv[0] != "sample" else "--seed",
                     str(tmp_path / "r.json") if argv[0] != "sample" else "0"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
        assert not (tmp_path / "r.json").exists()


def choice_table() -> list[list[str]]:
    """The rows of docs/kernels.md's table of what ``auto`` picks."""
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "kernels.md").read_text()
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith(("| cpu |", "| cuda |"))]
    assert len(rows) >= 20 and all(len(r) == 6 for r in rows)
    return rows


@pytest.mark.parametrize("device, spec, pattern_spec, mode, length, want", choice_table())
def test_auto_choice_table_in_docs(device, spec, pattern_spec, mode, length, want):
    """auto is a pure function of (device type, scheme, pattern, training or evaluation, length,
    hook): each row of the documented table, on a CPU-only machine even for the CUDA rows."""
    s, pattern = positions.create(spec, n_heads=8, head_dim=64, max_len=512), attention.create(pattern_spec)
    got = choose_kernel("auto", s, pattern, int(length), device, mode == "train", mode == "hook")
    assert got == want
    assert choose_kernel("auto", s, pattern, int(length), torch.device(device), mode == "train",
                         mode == "hook") == got  # a device or its type name: the same answer


def test_xpos_query_span_limit_sends_long_inputs_to_chunked():
    """xpos:scale_base=8 may rotate at most ~190 queries per transform: dense/flex refuse longer
    inputs, auto picks chunked, and chunked (which splits the queries) matches float64."""
    s = scheme("xpos:scale_base=8")
    span = s.max_query_span
    assert span == int(30 * 8 / -math.log(0.4 / 1.4))
    n = 600
    pattern, pos, cpu = attention.create("causal"), torch.arange(n), torch.device("cpu")
    with pytest.raises(ValueError, match="query span"):
        Attention(s, pattern, pos, kernel="dense")
    assert choose_kernel("flex", s, pattern, n, "cuda", False, False) == "flex"  # flex re-centres per query block
    assert choose_kernel("auto", s, pattern, n, cpu, training=False, hooked=False) == "chunked"
    assert choose_kernel("auto", s, pattern, span, cpu, training=False, hooked=False) == "dense"
    q, k, v = qkv(n, batch=1)
    got = Attention(s, pattern, pos)(q, k, v)
    want = reference_attention(q.double(), k.double(), v.double(), s, pattern, pos)
    assert torch.isfinite(got).all() and rel(got, want) <= 1e-4


def test_chunked_xpos_finite_with_positions_up_to_131071():
    """Queries ~131k positions after some keys: the decay only scales far keys down (to 0 in
    float32 where the true factor is ~1e-139), so the output is finite and matches float64."""
    s = positions.create("xpos", n_heads=H, head_dim=64)
    pos = torch.cat((torch.arange(0, 300), torch.arange(131072 - 300, 131072)))
    q, k, v = (torch.randn(1, H, 600, 64) for _ in range(3))
    pattern = attention.create("causal")
    att = Attention(s, pattern, pos)
    assert att.kernel == "chunked"  # 600 queries, but spread over 131,072 positions
    for kernel in ("dense", "flex"):  # one transform over all of them would overflow: refused
        with pytest.raises(ValueError, match="131072 positions exceeds one query span"):
            Attention(s, pattern, pos, kernel=kernel)
    got = att(q, k, v)
    assert torch.isfinite(got).all()
    want = reference_attention(q.double(), k.double(), v.double(), s, pattern, pos)
    assert rel(got, want) <= 1e-4


def test_chunked_hook_sees_the_reference_scores():
    s, pattern = scheme("kerple-log"), attention.create("bca:64")
    n = 300
    pos = torch.arange(n) + 2
    q, k, v = qkv(n, batch=1)
    seen = []

    def hook(layer, q_idx, k_idx, scores, probs):
        seen.append((layer, q_idx, k_idx, scores, probs))

    with torch.no_grad():
        out = Attention(s, pattern, pos, hook=hook)(q, k, v, layer=3)
        full = s.scores(q, k, pos, pos)
    assert [x[1][0].item() for x in seen] == list(range(0, n, kernels.step.CHUNK))
    idx = torch.arange(n)
    vis = pattern.visible(idx[:, None], idx[None, :])
    for layer, q_idx, k_idx, scores, probs in seen:
        assert layer == 3
        assert k_idx[0] >= max(0, int(q_idx[0]) - pattern.reach + 1) and k_idx[-1] == q_idx[-1]
        v_blk = vis[q_idx][:, k_idx]
        assert torch.allclose(scores[..., v_blk], full[..., q_idx[:, None], k_idx[None, :]][..., v_blk], atol=1e-5)
        assert torch.isneginf(scores[..., ~v_blk]).all() and (probs[..., ~v_blk] == 0).all()
        assert torch.allclose(probs.sum(-1), torch.ones(()), atol=1e-5)
    with torch.no_grad():
        dense = Attention(s, pattern, pos, kernel="dense")(q, k, v)
    assert rel(out, dense) <= 1e-4


# -- long inputs ----------------------------------------------------------------------------------
def small_model(spec: str, **kw) -> GPT:
    return tiny_gpt(spec, **{"d_model": 64, "train_len": 128, **kw}, seed=None)


def test_block_mask_of_a_long_window_holds_block_indices_only():
    """The window:128 block mask at 16,384 is built from block-level logic (never an n x n grid),
    each query tile listing only itself and the tile before, and equals the predicate on sampled
    tiles (the flex window path itself runs in the fast parity tests at N, eagerly on the CPU)."""
    n, tile = 16384, kernels.FLEX_BLOCK
    pattern = attention.create("window:128")
    mask = kernels.build_block_mask(pattern, n, torch.device("cpu"))
    tiles = n // tile
    assert mask.shape[-2:] == (n, n) and mask.kv_num_blocks.shape == (1, 1, tiles)
    assert mask.kv_num_blocks[0, 0, 0] == 1 and (mask.kv_num_blocks[0, 0, 1:] == 2).all()  # partial tiles
    assert mask.full_kv_num_blocks is None or int(mask.full_kv_num_blocks.sum()) == 0  # 128 < a full tile
    rows = torch.arange(1, tiles)
    assert (mask.kv_indices[0, 0, 1:, :2].sort(-1).values == torch.stack((rows - 1, rows), -1)).all()
    for i in (0, 7, tiles - 1):  # the predicate on tile i's rows against its listed tiles
        q = torch.arange(i * tile, (i + 1) * tile)
        listed = set(mask.kv_indices[0, 0, i, : int(mask.kv_num_blocks[0, 0, i])].tolist())
        k = torch.arange(n)
        seen = {int(j) // tile for j in k[pattern.visible(q[:, None], k[None, :]).any(0)]}
        assert seen == listed


@pytest.mark.parametrize("spec", ["xpos", "t5"])
def test_long_input_chunked_window_1024_matches_dense_tail(spec):
    """Fast sibling of the 16,384 case: auto runs chunked past LOCAL_DENSE_MAX under a window."""
    long_chunked_window(spec, 1024)


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["rope", "xpos", "alibi", "t5"])
def test_long_input_chunked_window_16384_matches_dense_tail(spec):
    long_chunked_window(spec, 16384)


def long_chunked_window(spec: str, n: int) -> None:
    tail = 512
    model = small_model(spec)
    tokens = torch.randint(0, 256, (1, n))
    with torch.no_grad():
        assert choose_kernel("auto", model.scheme, model.pattern("window:128"), n, "cpu", False, False) == "chunked"
        out = model(tokens, pattern="window:128", kernel="auto")  # auto: chunked past LOCAL_DENSE_MAX
        assert torch.isfinite(out).all()
        dense = model(tokens[:, -tail:], pattern="window:128", offset=n - tail, kernel="dense")
    keep = 2 * 127
    assert rel(out[:, -tail + keep:], dense[:, keep:]) <= 1e-4
    # the receptive-field argument is what makes this comparison valid: earlier outputs differ
    assert rel(out[:, -tail:-tail + 8], dense[:, :8]) > 1e-4


# -- xPos on flex at any length: re-centred query blocks ---------------------------------------------
def reference_rows(q, k, v, s, pattern, pos, rows: torch.Tensor) -> torch.Tensor:
    """The float64 reference output of the query rows ``rows`` only (against all n keys), through
    :meth:`Scheme.scores`, which transforms queries in groups within xPos's query span."""
    idx = torch.arange(pos.shape[0], device=pos.device)
    q, k, v = q.double(), k.double(), v.double()
    scores = s.scores(q[..., rows, :], k, pos[rows], pos)  # [b, h, rows, n]
    scores = scores.masked_fill(~pattern.visible(rows[:, None], idx[None, :]), -math.inf)
    return torch.softmax(scores, dim=-1) @ v


@pytest.mark.parametrize("pattern_spec", ["causal", pytest.param("window:64", marks=pytest.mark.slow)])  # fast: causal
def test_flex_xpos_recentres_query_blocks_past_its_span(eager_flex, pattern_spec):
    """Fast sibling of the 16,384 / 65,536 runs: xpos with scale_base=8 spans 191 query positions,
    so N = 257 queries run as three re-centred blocks of 128 (the last overlapping its
    predecessor), through the same code as the default xpos past 12,160 queries."""
    s, pattern = scheme("xpos:scale_base=8"), attention.create(pattern_spec)
    assert s.max_query_span == 191
    assert kernels.flex_query_blocks(s, N) == [(0, 128), (128, 256), (129, 257)]
    pos = torch.arange(N)
    q, k, v = qkv(N)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    with torch.no_grad():
        att = Attention(s, pattern, pos, kernel="flex")
        got = att(q, k, v)
    want = reference_attention(q.double(), k.double(), v.double(), s, pattern, pos)
    assert att.ran == "flex" and torch.isfinite(got).all() and err(got, want) <= TOL
    # every block one shape and one mask_mod (its rows offset by a tensor, the first block's by 0 too): one
    # graph for the three (a first block traced apart was a second compile on CUDA); this test runs before the
    # ladder tests below, which run its graph again
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs == 1


@pytest.mark.gpu
@pytest.mark.parametrize("n, pattern_spec", [(16384, "causal"), (65536, "window:128"), (65536, "causal")])
def test_flex_xpos_at_16384_and_65536_matches_float64(n, pattern_spec):
    """The default xpos (query span 12,260) on compiled flex (CUDA: refused on the CPU) far past
    its span: rows at the start, on both sides of every block boundary and at the end equal the
    float64 reference."""
    cuda = torch.device("cuda")
    s, pattern = scheme("xpos").to(cuda), attention.create(pattern_spec)
    blocks = kernels.flex_query_blocks(s, n)
    assert len(blocks) > 1 and all(b - a == blocks[0][1] for a, b in blocks)
    pos = torch.arange(n, device=cuda)
    q, k, v = (t.to(cuda) for t in qkv(n, batch=1))
    with torch.no_grad():
        att = Attention(s, pattern, pos, kernel="flex")
        got = att(q, k, v)
    assert att.ran == "flex" and torch.isfinite(got).all()
    edges = [a for a, _ in blocks[1:]]
    rows = torch.cat([torch.arange(0, 32), torch.arange(n - 32, n)]
                     + [torch.arange(e - 4, e + 4) for e in edges]).unique().to(cuda)
    want = reference_rows(q, k, v, s, pattern, pos, rows)
    assert err(got[..., rows, :], want) <= TOL


# -- the flex ladder under injected kernel failures --------------------------------------------------
class OutOfResources(Exception):
    """Named like triton.runtime.errors.OutOfResources (the ladder matches by name: triton is not
    installed on the CPU)."""


def inductor_error() -> Exception:
    from torch._inductor.exc import InductorError

    cause = RuntimeError("No valid triton configs. OutOfMemoryError: out of resource: "
                         "triton_tem_fused_flex_attention_0 Required: 245760 Hardware limit: 232448")
    return InductorError(cause, None)


FAILURES = {
    "InductorError": inductor_error,
    "no valid triton configs": lambda: RuntimeError("No valid triton configs. PassManager::run failed"),
    "OutOfResources": lambda: OutOfResources("out of resource: shared memory, Required: 245760, Hardware limit: "
                                             "232448. Reducing block sizes or `num_stages` may help."),
}


class FailingFlex:
    """A stand-in for the compiled flex call: raises ``error()`` on the ladder's rungs in ``fail``
    and runs eager FlexAttention (with its CPU backward) on the others; counts calls per rung."""

    def __init__(self, error, fail) -> None:
        from torch.nn.attention.flex_attention import flex_attention

        self.error, self.fail, self.eager, self.calls = error, set(fail), flex_attention, []

    def __call__(self, q, k, v, *, score_mod=None, block_mask=None, scale=None, kernel_options=None):
        rung = kernels.flex.FLEX_RUNGS.index(kernel_options)
        self.calls.append(rung)
        if rung in self.fail:
            raise self.error()
        return self.eager(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale)


@pytest.fixture
def ladder(eager_flex, monkeypatch):
    """Install a FailingFlex (fresh decisions and warnings; flex allowed to train on the CPU, as on
    CUDA, since the stand-in's eager flex has a backward)."""
    monkeypatch.setattr(kernels.flex, "_WARNED", set())
    real = kernels.choose_kernel

    def choose(kernel, scheme, pattern, n, device, training, hooked, **kw):
        return real(kernel, scheme, pattern, n, device, False, hooked, **kw)

    monkeypatch.setattr(kernels.attention, "choose_kernel", choose)

    def install(error, fail) -> FailingFlex:
        flex = FailingFlex(error, fail)
        monkeypatch.setattr(kernels.flex, "compiled_flex", lambda: flex)
        return flex

    return install


def tiny_model(spec: str) -> GPT:
    return tiny_gpt(spec, n_layers=1, train_len=64).train()


def train_losses(model: GPT, kernel: str, steps: int = 2) -> list[float]:
    """A few steps of lexkit's own train_step with the model attending through ``kernel``."""
    from lexkit.training.loop import make_optimizer, train_step
    from lexkit.training.settings import TrainConfig

    model.forward = functools.partial(type(model).forward, model, kernel=kernel)
    optimizer = make_optimizer(model, TrainConfig())
    gen = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        window = torch.randint(0, 256, (2, 65), generator=gen)
        losses.append(train_step(model.train(), optimizer, window[:, :-1], window[:, 1:], grad_clip=1.0))
    return losses


@pytest.mark.parametrize("failure", list(FAILURES))
def test_ladder_steps_down_on_each_failure_kind(ladder, failure):
    """torch's options fail with each error kind in turn: the next rung runs and gives the
    reference's output, one warning names the failure and the kernel that runs instead. The scheme,
    pattern and inputs of test_flex_xpos_recentres_query_blocks_past_its_span (three query blocks, each
    through the ladder): the eager flex graph traced there runs here, not a trace of its own (0.2 s)."""
    ladder(FAILURES[failure], fail={0})
    s, pattern, pos = scheme("xpos:scale_base=8"), attention.create("causal"), torch.arange(N)
    q, k, v = qkv(N)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        att = Attention(s, pattern, pos, kernel="flex")
        out = [att(q, k, v, layer) for layer in range(3)]
    want = reference_attention(q.double(), k.double(), v.double(), s, pattern, pos)
    assert att.ran == "flex:128x64/3" and all(err(o, want) <= TOL for o in out)
    notes = [str(w.message) for w in caught if "FlexAttention failed" in str(w.message)]
    name = "RuntimeError" if failure == "no valid triton configs" else failure
    assert len(notes) == 1 and f"flex ({name}: " in notes[0] and "running flex:128x64/3 instead" in notes[0], notes


def test_ladder_trains_like_dense_and_keeps_its_decision(ladder):
    """Training through a ladder whose first rung fails (Inductor's error): the losses are the
    dense path's, one warning in all, and the decision is kept per (scheme, pattern, length,
    dtype, device): later steps go straight to rung 1."""
    flex = ladder(FAILURES["InductorError"], fail={0})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = train_losses(tiny_model("kerple-log"), "flex")
    want = train_losses(tiny_model("kerple-log"), "dense")
    assert got == pytest.approx(want, abs=1e-5)
    notes = [str(w.message) for w in caught if "FlexAttention failed" in str(w.message)]
    assert len(notes) == 1 and "flex (InductorError: " in notes[0], notes
    assert "kerple-log under causal at length 64 (torch.float32, cpu)" in notes[0]
    key = ("kerple-log", "causal", 64, "torch.float32", "cpu")
    assert kernels.flex.FLEX_DECISIONS == {key: 1}
    assert flex.calls[:2] == [0, 1] and set(flex.calls[2:]) == {1}  # rung 0 tried once, never again


def test_ladder_falls_back_to_chunked_in_training_and_evaluation(ladder):
    """Every flex rung fails: the chunked kernel runs; training and evaluation give the dense
    path's numbers; the evaluation rows and the warning say what ran."""
    from lexkit.evaluate import evaluate

    flex = ladder(FAILURES["OutOfResources"], fail=range(len(kernels.flex.FLEX_RUNGS)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = train_losses(tiny_model("alibi"), "flex")
        doc = bytes(torch.randint(0, 256, (128,), generator=torch.Generator().manual_seed(2)).tolist())
        model = tiny_model("alibi")
        flex_eval = evaluate(model, [doc], [64], ["causal", "window:16"], kernel="flex")
    assert got == pytest.approx(train_losses(tiny_model("alibi"), "dense"), abs=1e-5)
    dense_eval = evaluate(model, [doc], [64], ["causal", "window:16"], kernel="dense")
    for row, want in zip(flex_eval["results"], dense_eval["results"]):
        assert row["bpb"] == pytest.approx(want["bpb"], abs=1e-6)
        assert row["kernel"] == "chunked" and want["kernel"] == "dense"
    notes = [str(w.message) for w in caught if "FlexAttention failed" in str(w.message)]
    assert len(notes) == 2  # one per (pattern, length): training and evaluation at 64 causal share one
    assert all("running chunked instead" in note and "flex:128x64/1 (OutOfResources" in note for note in notes)
    assert set(kernels.flex.FLEX_DECISIONS.values()) == {len(kernels.flex.FLEX_RUNGS)}
    calls = len(flex.calls)
    evaluate(model, [doc], [64], ["causal"], kernel="flex")
    assert len(flex.calls) == calls  # decided: straight to chunked


def test_ladder_reraises_what_is_not_a_kernel_failure(ladder):
    ladder(lambda: ValueError("a shape error of the caller"), fail={0})
    s, pattern = scheme("alibi"), attention.create("causal")
    q, k, v = qkv(8)
    with pytest.raises(ValueError, match="a shape error"):
        Attention(s, pattern, torch.arange(8), kernel="flex")(q, k, v)
    assert kernels.flex.FLEX_DECISIONS == {}


def test_kernel_failure_recognises_errors_by_name_message_and_cause():
    assert all(kernels.kernel_failure(make()) for make in FAILURES.values())
    wrapped = RuntimeError("backend compiler failed")
    wrapped.__cause__ = OutOfResources("out of resource: shared memory")
    assert kernels.kernel_failure(wrapped)
    assert not kernels.kernel_failure(RuntimeError("size mismatch"))
    assert [kernels.flex_label(r) for r in range(len(kernels.flex.FLEX_RUNGS) + 1)] == [
        "flex", "flex:128x64/3", "flex:128x64/2", "flex:128x64/1", "chunked"]
    for options in kernels.flex.FLEX_RUNGS[1:]:  # tiles divide the block mask's; backward constraints
        assert kernels.FLEX_BLOCK % options["fwd_BLOCK_M"] == 0 and kernels.FLEX_BLOCK % options["fwd_BLOCK_N"] == 0
        assert options["bwd_BLOCK_N1"] % options["bwd_BLOCK_M1"] == 0
        assert options["bwd_BLOCK_M2"] % options["bwd_BLOCK_N2"] == 0


def test_record_kernels_collects_what_ran():
    s, q, k, v = scheme("rope"), *qkv(8)
    with attention.record_kernels() as outer:
        Attention(s, attention.create("causal"), torch.arange(8), kernel="dense")(q, k, v)
        with attention.record_kernels() as inner:
            Attention(s, attention.create("causal"), torch.arange(8), kernel="chunked")(q, k, v)
    assert outer == ["dense", "chunked"] and inner == ["chunked"]
    assert attention.kernel_label(outer) == "dense+chunked" and attention.kernel_label([]) is None
