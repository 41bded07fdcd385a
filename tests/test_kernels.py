"""The three kernels (dense, chunked, compiled FlexAttention) against the float64 reference path.

FlexAttention compiles on CPU (seconds per new shape, score_mod or mask): every case here uses the
same head count and head dim (2 x 16) so compiled code is shared, and the bulk (other lengths) is
marked slow; the fast 257-length grid runs the same code path for every scheme and pattern.
"""

from __future__ import annotations

import ctypes
import math

import pytest
import torch

from lexkit import GPT, ModelConfig, attention, positions
from lexkit.attention import Attention, choose_kernel, kernels, reference_attention
from schemes_under_test import BIAS, TEN

PATTERNS = ["causal", "window:64", "bca:64"]
H, HD = 2, 16


def scheme(spec: str, n_heads: int = H, head_dim: int = HD):
    s = positions.create(spec, n_heads=n_heads, head_dim=head_dim, max_len=4096)
    if hasattr(s, "table") and spec == "t5":  # make the learned T5 bias large enough to matter
        with torch.no_grad():
            s.table.normal_(0, 1.0)
    return s


def qkv(n: int, dtype=torch.float32, batch: int = 2):
    return tuple(torch.randn(batch, H, n, HD, dtype=dtype) for _ in range(3))


def rel(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.double() - want.double()).abs().max() / want.double().abs().max())


def check_all_kernels(specs, pattern_spec: str, n: int, offset: int = 5) -> None:
    """dense, chunked and flex forward outputs within 1e-4 of max|output| of the float64 reference."""
    pattern = attention.create(pattern_spec)
    pos = torch.arange(offset, offset + n)
    for spec in specs:
        s = scheme(spec)
        q, k, v = qkv(n)
        with torch.no_grad():
            want = reference_attention(q.double(), k.double(), v.double(), s, pattern, pos)
            for kernel in ("dense", "chunked", "flex"):
                att = Attention(s, pattern, pos, kernel=kernel)
                assert att.kernel == kernel
                got = att(q, k, v)
                assert got.shape == want.shape and got.dtype == torch.float32
                assert rel(got, want) <= 1e-4, (spec, pattern_spec, n, kernel, rel(got, want))


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


# -- dense == flex == chunked == reference --------------------------------------------------------
NO_BIAS = ["none", "sinusoidal", "learned", "rope", "xpos"]


@pytest.mark.parametrize(
    "pattern_spec, specs",
    [("causal", TEN), ("window:64", BIAS), ("bca:64", NO_BIAS)],
)
def test_kernels_agree_at_257(pattern_spec, specs):
    """Fast sibling of the full grid: every scheme under causal, and under each local pattern
    every scheme of one kind of score_mod (a gather from the bias table, or none), so every
    compiled (pattern, score_mod) kind runs while FlexAttention compiles stay few."""
    check_all_kernels(specs, pattern_spec, 257)


@pytest.mark.slow
@pytest.mark.parametrize("pattern_spec", PATTERNS)
def test_kernels_agree_every_scheme_every_pattern_at_257(pattern_spec):
    check_all_kernels(TEN, pattern_spec, 257)


@pytest.mark.slow
@pytest.mark.parametrize("n", [64, 1024])
@pytest.mark.parametrize("pattern_spec", PATTERNS)
def test_kernels_agree_rope_alibi_at_64_and_1024(pattern_spec, n):
    check_all_kernels(["rope", "alibi"], pattern_spec, n)


def test_flex_raises_the_recompile_limit():
    kernels.compiled_flex()
    import torch._dynamo

    config = torch._dynamo.config
    limits = [getattr(config, name) for name in ("cache_size_limit", "recompile_limit") if hasattr(config, name)]
    assert limits and all(limit >= 256 for limit in limits)


# -- chunked == dense, with gradients --------------------------------------------------------------
@pytest.mark.parametrize("pattern_spec", PATTERNS)
def test_chunked_equals_dense_with_gradients_at_600(pattern_spec):
    n = 600  # three chunks of 256
    assert kernels.CHUNK < n < 3 * kernels.CHUNK
    pattern = attention.create(pattern_spec)
    pos = torch.arange(n) + 11
    for spec in TEN:
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
    assert Attention(s, pattern, pos, kernel="flex").kernel == "flex"  # flex re-centres per query block
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
    assert [x[1][0].item() for x in seen] == list(range(0, n, kernels.CHUNK))
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
    cfg = ModelConfig(scheme=spec, n_layers=2, d_model=64, n_heads=2, train_len=128, **kw)
    return GPT(cfg).eval()


def _can_measure_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status("VmHWM") is not None
    except OSError:
        return False


def _status(key: str) -> int | None:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return None


def peak_rss_increase(fn) -> int:
    """Bytes the process's peak RSS rose above its RSS at the start while fn ran (Linux). Free heap
    memory is handed back first (malloc_trim), so allocations inside fn cannot hide in it."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak (VmHWM) to the current RSS
    start = _status("VmRSS")
    fn()
    return _status("VmHWM") - start


def run_long_flex(n: int) -> None:
    """window:128 over one n-token sequence on the compiled FlexAttention path (small model). The
    block mask holds O((n/128)^2) block indices, never an n x n grid, and the attention's peak
    memory (block mask built inside the measurement) is far below one n x n float tensor. The
    dense kernel is measured the same way as a control: the measurement does see its n x n mask."""
    model = small_model("alibi")
    tokens = torch.randint(0, 256, (1, n))
    pattern = model.pattern("window:128")
    with torch.no_grad():
        logits = model(tokens, pattern=pattern, kernel="flex")  # compiles (first call per shape)
        assert logits.shape == (1, n, 257) and torch.isfinite(logits).all()
        mask = kernels.cached_block_mask(pattern, n, torch.device("cpu"))
        blocks = math.ceil(n / 128)
        assert mask.shape[-2:] == (n, n)
        assert int(mask.kv_num_blocks.max()) <= 2  # a query block sees itself and the one before
        tensors = [t for t in (mask.kv_num_blocks, mask.kv_indices, mask.full_kv_num_blocks, mask.full_kv_indices)
                   if t is not None]
        assert max(t.numel() for t in tensors) <= blocks * blocks  # n^2 / 16384 entries at most
        # the tail of the output equals a dense run over just the tokens that can reach it
        tail = 1024
        dense = model(tokens[:, -tail:], pattern=pattern, offset=n - tail, kernel="dense")
        keep = 2 * 127  # two layers: the first 254 tail outputs see keys before the tail
        assert rel(logits[:, -tail + keep:], dense[:, keep:]) <= 1e-4
        if not _can_measure_peak():
            return
        # q, k, v laid out as the model's (same strides: no recompile)
        q, k, v = torch.randn(1, n, 3, 2, 32).permute(2, 0, 3, 1, 4)
        pos = torch.arange(n)

        def attend(kernel):
            kernels._BLOCK_MASKS.clear()  # rebuild the block mask inside the measurement
            return lambda: Attention(model.scheme, pattern, pos, kernel=kernel)(q, k, v)

        used = peak_rss_increase(attend("flex"))
        assert used < n * n * 4 / 16, used
        if n <= 4096:
            used_dense = peak_rss_increase(attend("dense"))
            assert used_dense > n * n * 4, used_dense


def test_long_input_flex_window_4096_memory():
    run_long_flex(4096)


@pytest.mark.slow
def test_long_input_flex_window_65536():
    run_long_flex(65536)


@pytest.mark.parametrize("spec", ["rope", "xpos", "alibi", "t5"])
def test_long_input_chunked_window_16384_matches_dense_tail(spec):
    n, tail = 16384, 512
    model = small_model(spec)
    tokens = torch.randint(0, 256, (1, n))
    with torch.no_grad():
        out = model(tokens, pattern="window:128", kernel="auto")  # auto: chunked past DENSE_MAX
        assert torch.isfinite(out).all()
        dense = model(tokens[:, -tail:], pattern="window:128", offset=n - tail, kernel="dense")
    keep = 2 * 127
    assert rel(out[:, -tail + keep:], dense[:, keep:]) <= 1e-4
    # the receptive-field argument is what makes this comparison valid: earlier outputs differ
    assert rel(out[:, -tail:-tail + 8], dense[:, :8]) > 1e-4
