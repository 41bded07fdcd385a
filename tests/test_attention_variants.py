"""Attention variants (place ``attention``): differential attention (Ye et al., ICLR 2025) and
stick-breaking attention (Tan et al., ICLR 2025).

Oracles: each paper's equation transcribed here in float64 with loops and explicit products (the
model's embedding, norms, MLP and head are reused in float64; the attention is written from the
equation, not through lexkit's kernels), transformers' ``DiffLlamaAttention`` on the same weights
(its heads paired (i, i + H/2) where the reference pairs (2i, 2i + 1): the weights are permuted to
match), and the stick-breaking authors' naive reference (``fla-core``'s
``naive_stickbreaking_attn``, loaded from its file: ``import fla`` needs triton). Then: dense ==
chunked (several query blocks) == the KV cache == eager flex for diff; flex refused by name for
stick-breaking; cached generation == uncached; bad parameters; ``lexkit train`` with each at the
tiny preset, then eval (streamed), retrieval and sample."""

from __future__ import annotations

import copy
import importlib.util
import json
import math
from importlib import metadata

import pytest
import torch
import torch.nn.functional as F

from cli_checks import train_refused
from kit import nudge, tiny_gpt
from lexkit import GPT, attention, layouts, positions
from lexkit.attention import Attention, kernels
from lexkit.attention.modifiers import Differential, Scoring, StickBreaking, stick_breaking
from lexkit.cli import main
from lexkit.model.sample import generate
from toy_corpus import TINY, write_corpus


def model(layout: str, n_layers: int = 2, heads: int = 4, d: int = 32, train_len: int = 16) -> GPT:
    """The kit's model with every learned state of its variants moved off its initialization."""
    net = tiny_gpt(layout=layout, n_layers=n_layers, d_model=d, n_heads=heads, train_len=train_len)
    return nudge(net, lambda name: ".diff." in name or ".stickbreak." in name, 0.3)


def reference_logits(net: GPT, tokens: torch.Tensor, attend) -> torch.Tensor:
    """The model in float64 with each layer's attention output (before the projection) from
    ``attend(index, block, q, k, v)``, q, k, v [b, H, n, hd] (scheme ``none``: no transform)."""
    m = copy.deepcopy(net).double()
    x = m.embed(tokens)
    for i, block in enumerate(m.blocks):
        a = block.ln1(x)
        b, n, d = a.shape
        heads = net.cfg.n_heads
        q, k, v = block.qkv(a).view(b, n, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
        x = x + block.proj(attend(i, block, q, k, v))
        x = x + block.mlp(block.ln2(x))
    return m.head(m.ln_f(x))


def visible_of(spec: str, n: int) -> torch.Tensor:
    idx = torch.arange(n)
    return attention.create(spec).visible(idx[:, None], idx[None, :])  # [n, n]


# -- stick-breaking: the equation --------------------------------------------------------------
def stick_breaking_product(z: torch.Tensor, visible: torch.Tensor, current: bool) -> torch.Tensor:
    """A_ij = β_ij ∏_{j<k<i} (1 − β_ik) (k <= i with ``current``), β = σ(z), over the keys that count
    (visible, before the query or the query itself), by explicit products, float64."""
    n_q, n_k = visible.shape
    beta = torch.sigmoid(z.double())
    out = torch.zeros_like(beta)
    for i in range(n_q):
        counts = [j for j in range(n_k) if visible[i, j] and (j < i or (current and j == i))]
        for j in counts:
            rest = [1 - beta[..., i, m] for m in counts if m > j]
            out[..., i, j] = beta[..., i, j] * (torch.stack(rest).prod(0) if rest else 1.0)
    return out


@pytest.mark.parametrize("spec", ["causal", "window:4", "sinks:3,K=2"])  # sinks: keys hidden between
@pytest.mark.parametrize("current", [False, True])
def test_stick_breaking_weights_are_the_papers_product(spec, current):
    torch.manual_seed(1)
    n = 11
    z = 3 * torch.randn(2, 3, n, n)
    vis = visible_of(spec, n)
    idx = torch.arange(n)
    got = stick_breaking(z.masked_fill(~vis, -math.inf), vis, idx, idx, current=current)
    want = stick_breaking_product(z, vis, current)
    assert (got.double() - want).abs().max() <= 1e-6
    beta = torch.sigmoid(z.double())
    left = torch.where(vis & ((idx[None] <= idx[:, None]) if current else (idx[None] < idx[:, None])),
                       1 - beta, torch.ones_like(beta)).prod(-1)
    assert (1 - got.double().sum(-1) - left).abs().max() <= 1e-6  # the leftover is ∏ (1 − β) over the keys
    if not current:
        assert not got[..., 0, :].any()  # nothing before the first query: all its stick is left over
    # the most recent strong match wins: a key right before the query with β ≈ 1 takes everything
    z2 = torch.full((1, 1, 4, 4), -2.0)
    z2[..., 3, 2] = 30.0
    w = stick_breaking(z2, visible_of("causal", 4), torch.arange(4), torch.arange(4))
    assert float(w[0, 0, 3, 2]) > 0.999 and float(w[0, 0, 3, :2].sum()) < 1e-6


def _naive_reference():
    """fla-core's naive stick-breaking attention (the paper's second author's reference), from its file."""
    try:
        path = metadata.distribution("fla-core").locate_file("fla/ops/stickbreaking_attn/naive.py")
    except metadata.PackageNotFoundError:
        pytest.skip("fla-core is not installed (pip install fla-core: the [dev] extra)")
    if not path.exists():
        pytest.skip(f"this fla-core has no {path.name} where 0.6 keeps it")
    spec = importlib.util.spec_from_file_location("fla_naive_stickbreaking", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.naive_stickbreaking_attn


@pytest.mark.parametrize("current", [False, True])
def test_stick_breaking_matches_the_reference_code_on_every_kernel(current, monkeypatch):
    """The weights and the leftover (the mass channel :meth:`StickBreaking.prepare` appends) of the
    dense and chunked kernels (query blocks of 8) against the reference's o and rem."""
    naive = _naive_reference()
    monkeypatch.setattr(kernels.step, "CHUNK", 8)
    torch.manual_seed(2)
    b, h, n, d = 2, 3, 29, 8
    q, k, v = (torch.randn(b, h, n, d) for _ in range(3))
    o, rem = naive(q.transpose(1, 2).double(), k.transpose(1, 2).double(), v.transpose(1, 2).double(),
                   attend_current=current)  # [b, n, h, d], [b, n, h]
    variant = StickBreaking(current=current, norm=True)
    _, _, rows = variant.prepare(q, k, v, None)  # [b, h, n, d + 1]
    scheme, pos = positions.create("none", n_heads=h, head_dim=d), torch.arange(n)
    for kernel in ("dense", "chunked"):
        got = Attention(scheme, attention.create("causal"), pos, kernel=kernel, scoring=Scoring.of(variant))(q, k, rows)
        assert (got[..., :d].double() - o.transpose(1, 2)).abs().max() <= 1e-5, kernel
        assert (1 - got[..., d].double() - rem.transpose(1, 2)).abs().max() <= 1e-5, kernel


# -- stick-breaking: the layer --------------------------------------------------------------------
def stick_breaking_layer(spec: str, current: bool = False, norm: bool = True):
    """The reference model's attention (dolomite SBAttention): Σ_j A_ij v_j + (1 − Σ_j A_ij) b_h, then
    GroupNorm(heads, d_model), from the equation in float64."""
    def attend(i, block, q, k, v):
        b, h, n, d = q.shape
        if not hasattr(block, "stickbreak"):
            return softmax_layer(spec)(i, block, q, k, v)
        z = q @ k.transpose(-1, -2) / math.sqrt(d)
        a = stick_breaking_product(z, visible_of(spec, n), current)  # [b, h, n, n]
        out = a @ v + (1 - a.sum(-1, keepdim=True)) * block.stickbreak.bias[:, None, :]
        out = out.transpose(1, 2)  # [b, n, h, d]
        if norm:
            mean = out.mean(-1, keepdim=True)
            var = out.var(-1, unbiased=False, keepdim=True)
            g = block.stickbreak.norm
            out = (out - mean) / torch.sqrt(var + 1e-5) * g.weight.view(h, d) + g.bias.view(h, d)
        return out.reshape(b, n, h * d)
    return attend


def softmax_layer(spec: str):
    def attend(i, block, q, k, v):
        b, h, n, d = q.shape
        s = (q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(~visible_of(spec, n), -math.inf)
        return (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, n, h * d)
    return attend


@pytest.mark.parametrize("layout, spec, current, norm", [
    ("none@causal+stickbreak", "causal", False, True),
    ("none@window:5+stickbreak:current=true,norm=false", "window:5", True, False),
    ("none@bca:6+stickbreak", "bca:6", False, True),
])
def test_a_stick_breaking_layer_is_the_reference_models_on_dense_chunked_and_the_cache(
        layout, spec, current, norm, monkeypatch):
    monkeypatch.setattr(kernels.step, "CHUNK", 8)
    net = model(layout, n_layers=1, heads=2, d=16)
    x = torch.randint(0, 256, (2, 21))
    want = reference_logits(net, x, stick_breaking_layer(spec, current, norm))
    with torch.no_grad():
        for kernel in ("dense", "chunked"):
            assert (net(x, kernel=kernel).double() - want).abs().max() <= 1e-5, kernel
        cache = net.new_cache()
        pieces = torch.cat([net(x[:, i:i + 5], cache=cache) for i in range(0, 21, 5)], dim=1)
    assert (pieces.double() - want).abs().max() <= 1e-5


def test_flex_refuses_stick_breaking_by_name_and_auto_never_picks_it():
    scheme, pat, pos = positions.create("none", n_heads=2, head_dim=8), attention.create("causal"), torch.arange(8)
    scoring = Scoring.of(StickBreaking(current=False, norm=True))
    with pytest.raises(ValueError, match="kernel 'flex' cannot run stick-breaking attention"):
        Attention(scheme, pat, pos, kernel="flex", scoring=scoring)
    for n in (64, 4096):  # on CUDA: never SDPA, never flex
        ran = kernels.choose_kernel("auto", scheme, pat, n, "cuda", False, False, scoring=scoring)
        assert ran == ("dense" if n <= kernels.DENSE_MAX else "chunked")
    assert kernels.choose_kernel("auto", scheme, pat, 64, "cuda", False, False,
                                 scoring=Scoring.of(Differential(init=None))) == "dense"  # SDPA is_causal
    assert Scoring().weights is None and not Scoring().needs_scores  # no variant: today's kernels


# -- differential attention: the equation and transformers' DiffLlama -----------------------------
def differential_layer(spec: str):
    """(softmax(Q1 K1ᵀ/√d) − λ softmax(Q2 K2ᵀ/√d)) V per pair of heads (2i, 2i + 1), RMSNorm (ε 1e-5,
    the learned gain), × (1 − λ_init), λ_init = 0.8 − 0.6 exp(−0.3 (l − 1)) at the 1-based layer l."""
    def attend(i, block, q, k, v):
        b, h, n, d = q.shape
        if not hasattr(block, "diff"):
            return softmax_layer(spec)(i, block, q, k, v)
        st = block.diff
        init = 0.8 - 0.6 * math.exp(-0.3 * ((i + 1) - 1))
        lam = torch.exp(st.lambda_q1 @ st.lambda_k1) - torch.exp(st.lambda_q2 @ st.lambda_k2) + init
        mask = visible_of(spec, n)
        out = []
        for p in range(h // 2):
            scores = [(q[:, j] @ k[:, j].transpose(-1, -2) / math.sqrt(d)).masked_fill(~mask, -math.inf)
                      for j in (2 * p, 2 * p + 1)]  # head 2p: Q1, K1; head 2p + 1: Q2, K2
            maps = [torch.softmax(s, -1) for s in scores]
            values = torch.cat((v[:, 2 * p], v[:, 2 * p + 1]), dim=-1)  # [b, n, 2d]
            o = (maps[0] - lam * maps[1]) @ values
            o = o / torch.sqrt(o.pow(2).mean(-1, keepdim=True) + 1e-5) * st.gain
            out.append(o * (1 - init))
        return torch.cat(out, dim=-1)  # [b, n, H d]: pair p in the channels of heads 2p, 2p + 1
    return attend


def test_lambda_init_follows_the_layer_and_init_fixes_it():
    net = model("none+diff;none+diff;none;none+diff:init=0.5", n_layers=4)
    got = [getattr(block, "diff", None) for block in net.blocks]
    assert [None if s is None else round(s.lambda_init, 12) for s in got] == \
        [0.2, round(0.8 - 0.6 * math.exp(-0.3), 12), None, 0.5]
    assert [layer.spec for layer in net.stack] == ["none@causal+diff", "none@causal+diff", "none@causal",
                                                 "none@causal+diff:init=0.5"]
    assert sorted(k.split(".", 3)[3] for k in net.state_dict() if k.startswith("blocks.0.diff.")) == \
        ["gain", "lambda_k1", "lambda_k2", "lambda_q1", "lambda_q2"]


@pytest.mark.parametrize("layout, specs, flex", [
    ("none@causal+diff;none@causal+diff", ["causal", "causal"], False),
    ("none@window:5+diff;none@causal+diff", ["window:5", "causal"], False),
    # eager flex: ~5 s; its fast sibling is the case above on dense, chunked and the cache (flex's own
    # score_mod path is checked against dense in tests/test_kernels.py)
    pytest.param("none@window:5+diff;none@causal+diff", ["window:5", "causal"], True, marks=pytest.mark.slow),
    ("none@chunk:6;none@causal+diff", ["chunk:6", "causal"], False),
])
def test_differential_attention_is_the_papers_equation_on_every_kernel_and_the_cache(
        layout, specs, flex, monkeypatch, request):
    monkeypatch.setattr(kernels.step, "CHUNK", 8)
    net = model(layout)
    x = torch.randint(0, 256, (2, 23))

    def attend(i, block, q, k, v):
        return differential_layer(specs[i])(i, block, q, k, v)

    want = reference_logits(net, x, attend)
    with torch.no_grad():
        if flex:
            request.getfixturevalue("eager_flex")
        for kernel in ("dense", "chunked") + (("flex",) if flex else ()):
            assert (net(x, kernel=kernel).double() - want).abs().max() <= 1e-5, kernel
        cache = net.new_cache()
        pieces = torch.cat([net(x[:, i:i + 4], cache=cache) for i in range(0, 23, 4)], dim=1)
    assert (pieces.double() - want).abs().max() <= 1e-5


@pytest.mark.slow  # ~5 s importing DiffLlama's modelling code; fast sibling: the float64 transcription test above
@pytest.mark.xdist_group("hf")  # beside test_hf.py under `pytest -n`: one worker imports transformers
def test_differential_attention_matches_transformers_diffllama_on_the_same_weights():
    tf = pytest.importorskip("transformers")
    from transformers.models.diffllama.modeling_diffllama import DiffLlamaAttention

    heads, hd, n = 4, 8, 13
    net = model("none+diff;none+diff", heads=heads, d=heads * hd)
    cfg = tf.DiffLlamaConfig(hidden_size=heads * hd, num_attention_heads=heads, num_key_value_heads=heads,
                             rms_norm_eps=1e-5, attention_dropout=0.0, attention_bias=False)
    cfg._attn_implementation = "eager"
    # DiffLlama's differential head i is heads (i, i + H/2); lexkit's (and the reference's) is (2i, 2i + 1)
    order = [2 * i for i in range(heads // 2)] + [2 * i + 1 for i in range(heads // 2)]
    rows = torch.cat([torch.arange(h * hd, (h + 1) * hd) for h in order])
    causal = torch.full((n, n), -math.inf).triu(1)[None, None].double()
    ones, zeros = torch.ones(1, n, hd).double(), torch.zeros(1, n, hd).double()
    refs = []
    for i, block in enumerate(net.blocks):
        ref = DiffLlamaAttention(cfg, layer_idx=i).double().eval()
        wq, wk, wv = block.qkv.weight.detach().double().chunk(3)
        with torch.no_grad():
            for proj, w in ((ref.q_proj, wq), (ref.k_proj, wk), (ref.v_proj, wv)):
                proj.weight.copy_(w[rows])
            ref.o_proj.weight.copy_(block.proj.weight.double())
            for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
                getattr(ref, name).copy_(getattr(block.diff, name).double())
            block.diff.gain.fill_(1.0)  # DiffLlama's norm has no gain
        refs.append(ref)
    m64 = copy.deepcopy(net).double()
    x = torch.randint(0, 256, (2, n))
    h = m64.embed(x)
    with torch.no_grad():
        for block, ref in zip(m64.blocks, refs):
            h = h + ref(block.ln1(h), position_embeddings=(ones, zeros), attention_mask=causal)[0]
            h = h + block.mlp(block.ln2(h))
        want = m64.head(m64.ln_f(h))
        assert (net(x).double() - want).abs().max() <= 1e-5


# -- both variants through the model ---------------------------------------------------------------
@pytest.mark.parametrize("layout", ["rope@window:6+diff;none@causal+diff", "rope@window:6;none@causal+stickbreak"])
def test_cached_generation_equals_uncached_and_the_variant_trains(layout):
    net = model(layout)
    for pattern in ("causal", "window:9"):
        cached = generate(net, b"ab = ", 12, pattern=pattern, temperature=0, cache=True)
        assert cached == generate(net, b"ab = ", 12, pattern=pattern, temperature=0, cache=False), pattern
    net.train()
    x = torch.randint(0, 256, (2, 16))
    for kernel in ("dense", "chunked"):
        net.zero_grad()
        F.cross_entropy(net(x, kernel=kernel).flatten(0, 1), x.flatten()).backward()
        grads = [p.grad for name, p in net.named_parameters() if ".diff." in name or ".stickbreak." in name]
        assert grads and all(g is not None and torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads), kernel


@pytest.mark.parametrize("text, words", [
    ("none+diff+stickbreak", ["two attentions", "diff", "stickbreak"]),
    ("none+stickbreak+sink", ["+stickbreak and +sink cannot share a layer"]),
    ("none+diff:init=1", ["diff", "init=1", "[0, 1)"]),
    ("none+stickbreak:current=maybe", ["stickbreak", "current=maybe", "bool"]),
    ("none+stickbreak:self=true", ["stickbreak", "'self'", "current, norm"]),
])
def test_bad_variants_name_the_fault(text, words):
    with pytest.raises(layouts.LayoutError) as err:
        layouts.parse(text, n_layers=1, train_len=16)
    assert all(w in str(err.value) for w in words), str(err.value)


@pytest.mark.parametrize("argv, words", [
    (["--layout", "rope@window:16 ; none@causal+diff:init=2"], ["layer 1", "init=2"]),
    (["--layout", "rope@window:16 ; none@causal+diff", "--heads", "1"], ["layer 1", "+diff", "even number of heads"]),
    (["--layout", "rope@window:16+stickbreak+sink ; none"], ["layer 0", "cannot share a layer"]),
])
def test_bad_variants_on_the_command_line_write_nothing(tmp_path, capsys, argv, words):
    line = train_refused(tmp_path, capsys, argv)
    assert all(w in line for w in words), line


@pytest.mark.parametrize("variant", ["stickbreak", "diff"])
def test_lexkit_trains_evaluates_streams_and_retrieves_with_each_variant(tmp_path, capsys, variant):
    data = write_corpus(tmp_path / "data")
    out = tmp_path / variant
    layout = f"rope@window:16 ; none@causal+{variant}"
    # 2 of TINY's 12 steps (saved and evaluated at the last): that it trains is checked, not how far
    assert main(["train", "--layout", layout, "--out", str(out), "--data", str(data), *TINY, "--steps", "2"]) == 0
    assert json.loads((out / "config.json").read_text())["model"]["layout"] == layout
    assert main(["eval", str(out), "--data", str(data), "--lengths", "64", "--stream", "--no-progress",
                 "--json", str(tmp_path / "e.json")]) == 0
    report = json.loads((tmp_path / "e.json").read_text())
    assert report["results"][0]["streamed"] is True and math.isfinite(report["results"][0]["bpb"])
    assert main(["retrieval", str(out), "--task", "copy", "--size", "4", "--lengths", "32", "--depths", "50",
                 "--samples", "2", "--json", str(tmp_path / "r.json")]) == 0
    assert main(["sample", str(out), "--prompt", "x = ", "--bytes", "8", "--temperature", "0", "--cache"]) == 0
    capsys.readouterr()
    assert main(["layouts"]) == 0
    listing = capsys.readouterr().out
    row = next(line for line in listing.splitlines() if line.startswith(variant + " "))
    source = "2410.17980" if variant == "stickbreak" else "Differential Transformer"
    assert "attention" in row and source in row
