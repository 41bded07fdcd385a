"""lexkit.model.hf: Hugging Face causal LMs through lexkit's attention, offline.

Tiny random models of each family are built from configs and saved to temporary directories
(no download; HF_HUB_OFFLINE=1 in conftest). References are transformers' own eager attention
(its causal mask, its sliding window, its rope scaling) or formulas written out here.
"""

from __future__ import annotations

import functools
import math
import sys

import pytest
import torch

from kit import tiny_gpt
from lexkit import resolution
from lexkit.core.errors import LexkitError
from lexkit.evaluate import evaluate
from tiny_hf import CORPUS, SMALL, VOCAB, VOCAB_TEXT, save
from tiny_hf import eager as _eager
from tiny_hf import ids as _ids
from tiny_hf import tokenizer as _tokenizer

#: under `pytest -n`, one worker imports transformers and builds the module's tiny models, once
pytestmark = pytest.mark.xdist_group("hf")


# -- fixtures: tiny models and a byte-level BPE tokenizer ---------------------------------------
@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("transformers")


def _configs(tf) -> dict:
    rope = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=32, **SMALL)
    return {
        "llama": tf.LlamaConfig(**rope),
        "mistral": tf.MistralConfig(**rope, sliding_window=None),
        "qwen2": tf.Qwen2Config(**rope),
        "gpt_neox": tf.GPTNeoXConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     rotary_pct=0.25, max_position_embeddings=32, **SMALL),
        "gpt2": tf.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=48,
                              scale_attn_by_inverse_layer_idx=True, **SMALL),  # per-layer scaling
        "bloom": tf.BloomConfig(hidden_size=32, n_layer=2, n_head=4, **SMALL),
    }


@pytest.fixture(scope="module")
def saved(tf, tmp_path_factory):
    """family -> directory holding a tiny random model and a byte-level BPE tokenizer."""
    tok = _tokenizer(tf)
    return {name: save(tf, config, tmp_path_factory.mktemp(name), tok) for name, config in _configs(tf).items()}


@pytest.fixture(scope="module")
def loaded(saved):
    """family -> lexkit's model of ``saved[family]`` (hf.load, no option), loaded on first use and kept for the
    module: the tests that take it only run it (a pattern, kernel, hook or offset is a call's, and each call
    runs at its own length whatever ran before) or read it; a test that changes a model, loads it with an
    option or hands it to an instrument loads its own."""
    from lexkit.model import hf

    return functools.cache(lambda family: hf.load(saved[family]))


@pytest.fixture(scope="module")
def reference(tf, saved):
    """family -> transformers' own eager model of ``saved[family]`` as saved (no config changed), loaded on
    first use and kept for the module: the tests only run forward passes through it, which change nothing in
    it (a reference with its config changed is loaded where it is used)."""
    return functools.cache(lambda family: _eager(tf, saved[family]))


# -- parity with transformers ---------------------------------------------------------------------
MODEL_TYPES = ["llama", "mistral", "qwen2", "gpt_neox", "gpt2", "bloom"]


@pytest.mark.parametrize("family", MODEL_TYPES)
def test_causal_reproduces_transformers_eager(loaded, reference, family):
    x = _ids(40)
    with torch.no_grad():
        theirs = reference(family)(x).logits
        model = loaded(family)
        ours = model(x, pattern="causal")
    assert model.hf.config._attn_implementation == "lexkit"
    assert theirs.abs().max() > 0.1  # not a degenerate model
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)


@pytest.mark.parametrize("family", ["llama", "gpt_neox", "gpt2"])
def test_chunked_kernel_matches_eager_across_blocks(loaded, reference, family, monkeypatch):
    """The chunked kernel (the score hook's path) in query blocks of 16 over 40 tokens."""
    from lexkit.attention import kernels

    monkeypatch.setattr(kernels.step, "CHUNK", 16)
    x = _ids(40)
    with torch.no_grad():
        theirs = reference(family)(x).logits
        ours = loaded(family)(x, pattern="causal", kernel="chunked")
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)


def test_window_reproduces_transformers_sliding_window(tf, saved, loaded, reference, tmp_path):
    """lexkit window:W on a Mistral without a window = transformers' own sliding_window=W; and
    the model's own window is kept under lexkit's causal pattern; a config changed after loading
    is an error naming the layer, never a silent run under the old reading."""
    from lexkit.model import hf

    w, x = 8, _ids(30)
    windowed = tmp_path / "windowed"
    config = tf.AutoConfig.from_pretrained(saved["mistral"])
    config.sliding_window = w
    windowed.mkdir()
    config.save_pretrained(windowed)
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (windowed / name).write_bytes((saved["mistral"] / name).read_bytes())
    with torch.no_grad():
        theirs = _eager(tf, saved["mistral"], sliding_window=w)(x).logits
        full = reference("mistral")(x).logits
        ours = loaded("mistral")(x, pattern=f"window:{w}")
        ours_chunked = loaded("mistral")(x, pattern=f"window:{w}", kernel="chunked")
        native = hf.load(windowed)
        kept = native(x, pattern="causal")
        changed = hf.load(saved["mistral"])
        changed.hf.config.sliding_window = w
        with pytest.raises(ValueError, match="layer 0: transformers masks it as window:8, but lexkit read causal"):
            changed(x)
    assert native.layers[0].pattern.spec == f"window:{w}" and native.cfg.layout == f"(rope:base=10000@window:{w})x2"
    assert (theirs - full).abs().max() > 1e-3  # the window changes the logits
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)
    torch.testing.assert_close(ours_chunked, theirs, atol=1e-4, rtol=0)
    torch.testing.assert_close(kept, theirs, atol=1e-4, rtol=0)


def _bca_mask(n: int, w: int) -> torch.Tensor:
    """BCA written out: blocks of w/2; a query sees its block causally and the previous block."""
    m = torch.zeros(n, n)
    for q in range(n):
        for k in range(n):
            if not (k <= q and k // (w // 2) >= q // (w // 2) - 1):
                m[q, k] = float("-inf")
    return m[None, None]


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_bca_matches_eager_with_the_mask_written_out(loaded, reference, family):
    x = _ids(24, batch=1)
    with torch.no_grad():
        theirs = reference(family)(x, attention_mask=_bca_mask(24, 8)).logits
        ours = loaded(family)(x, pattern="bca:8")
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)


def test_bloom_keeps_alibi_under_a_window(loaded):
    """Bloom's attention is its own (ALiBi inside BloomAttention): lexkit's pattern reaches it as
    a mask. window:W equals causal at positions < W (same keys visible) and differs after."""
    model = loaded("bloom")
    x = _ids(20)
    with torch.no_grad():
        causal, window = model(x, pattern="causal"), model(x, pattern="window:6")
    torch.testing.assert_close(window[:, :6], causal[:, :6], atol=1e-5, rtol=0)
    assert (window[:, 6:] - causal[:, 6:]).abs().amax() > 1e-4
    with pytest.raises(ValueError, match="kernel must be auto or dense"):
        model(x, kernel="chunked")
    with pytest.raises(ValueError, match="score hook"):
        model(x, hook=lambda *a: None)
    with pytest.raises(ValueError, match=r"one mask for every layer, so a pattern per layer \(L0=window:4\) cannot"):
        model(x, pattern="L0=window:4")


def test_offset_shifts_positions(loaded, reference):
    """``offset`` is the first token's position, as for lexkit's GPT."""
    x = _ids(12, batch=1)
    with torch.no_grad():
        eager = reference("gpt2")
        theirs = eager(x, position_ids=torch.arange(5, 17)[None]).logits
        ours = loaded("gpt2")(x, offset=5)
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)


# -- rope scaling -------------------------------------------------------------------------------
@pytest.mark.parametrize("scaling", [
    {"rope_type": "linear", "factor": 2.0},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
    {"rope_type": "dynamic", "factor": 2.0},
])
def test_rope_scaling_equals_transformers_rope_scaling(tf, saved, reference, scaling):
    from lexkit.model import hf

    x = _ids(48)  # past max_position_embeddings (32): dynamic NTK changes its base
    config = tf.AutoConfig.from_pretrained(saved["llama"])
    config.rope_parameters = {**config.rope_parameters, **scaling}
    with torch.no_grad():
        scaled = tf.AutoModelForCausalLM.from_pretrained(saved["llama"], config=config, attn_implementation="eager")
        theirs = scaled(x).logits
        plain = reference("llama")(x).logits
        model = hf.load(saved["llama"], rope_scaling=scaling)
        ours = model(x)
    assert (theirs - plain).abs().max() > 1e-4  # the scaling does something
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)
    assert model.cfg.rope["type"] == scaling["rope_type"] and model.cfg.rope["factor"] == scaling["factor"]


def test_rope_scaling_linear_divides_the_frequencies(tf, saved):
    """Position interpolation: inv_freq_i = base^(-2i/d) / s (formula written out)."""
    from lexkit.model import hf

    model = hf.load(saved["llama"], rope_scaling="linear:2")
    d = model.cfg.head_dim
    expected = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d) / 2
    torch.testing.assert_close(model.hf.model.rotary_emb.inv_freq.double(), expected, rtol=1e-6, atol=0)


def test_parse_rope_scaling():
    from lexkit.model.hf import parse_rope_scaling

    assert parse_rope_scaling("yarn:4") == {"rope_type": "yarn", "factor": 4}
    assert parse_rope_scaling("yarn:factor=4,original_max_position_embeddings=2048") == {
        "rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 2048}
    assert parse_rope_scaling('{"rope_type": "linear", "factor": 2}') == {"rope_type": "linear", "factor": 2}
    with pytest.raises(ValueError, match="not a number"):
        parse_rope_scaling("yarn:factor=big")


def test_bad_requests_are_clear_errors(tf, saved, loaded, tmp_path):
    from lexkit.model import hf

    with pytest.raises(ValueError, match="learned positions, not RoPE"):
        hf.load(saved["gpt2"], rope_scaling="linear:2")
    with pytest.raises(ValueError, match="unknown rope scaling type 'warp'"):
        hf.load(saved["llama"], rope_scaling="warp:2")
    with pytest.raises(ValueError, match="needs a factor"):
        hf.load(saved["llama"], rope_scaling={"rope_type": "yarn"})
    with pytest.raises(LexkitError, match="cannot load a model config"):
        hf.load(tmp_path / "nothing")
    opt = tf.OPTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, ffn_dim=32, vocab_size=VOCAB)
    opt.save_pretrained(tmp_path)
    with pytest.raises(LexkitError, match="model type 'opt' is not supported; supported: llama"):
        hf.load(tmp_path)
    model = loaded("gpt2")  # 48 learned positions
    with pytest.raises(ValueError, match="learned positions 0..47; length 49"):
        model(_ids(49, batch=1))


def test_missing_transformers_names_the_extra(monkeypatch, capsys):
    """Without transformers: one error line naming the extra (simulated by hiding the module)."""
    from lexkit.cli import main
    from lexkit.model import hf

    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(LexkitError, match=r"pip install -e '\.\[hf\]'"):
        hf.load("anything")
    assert main(["eval", "hf:anything", "--lengths", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "pip install -e '.[hf]'" in err[0]


# -- tokens, bytes and the protocol ---------------------------------------------------------------
@pytest.mark.parametrize("bos", [True, False])
def test_encode_counts_the_bytes_each_token_covers(tf, saved, loaded, bos, tmp_path):
    """Bytes per scored token sum to the UTF-8 bytes of the text the tokens decode to; without a
    BOS the first token is context only."""
    from lexkit.model import hf

    if not bos:
        _tokenizer(tf, bos=False).save_pretrained(tmp_path)
        for name in ("config.json", "model.safetensors"):
            (tmp_path / name).write_bytes((saved["llama"] / name).read_bytes())
    model = loaded("llama") if bos else hf.load(tmp_path)
    text = "".join(VOCAB_TEXT)
    ids, nbytes = model.encode(text.encode())
    assert ids.numel() == nbytes.numel() + 1 and (nbytes >= 0).all()
    assert (ids[0] == 0) == bos  # <s> is id 0
    body = ids[1:] if bos else ids  # the document's tokens
    assert model.tokenizer.decode(body.tolist()) == text  # byte-level BPE round-trips
    context = 0 if bos else 1  # document tokens that are context only

    def text_bytes(k: int) -> int:  # UTF-8 bytes of the text of the first k document tokens
        return len(model.tokenizer.decode(body[:k].tolist()).encode())

    for k in (5, 17, 40, body.numel()):  # any prefix: its bytes are the bytes of its tokens' text
        assert int(nbytes[: k - context].sum()) == text_bytes(k) - text_bytes(context)
    assert text_bytes(body.numel()) == len(text.encode()) > len(text)  # multi-byte characters counted

def test_evaluate_is_the_protocol_in_tokens(saved, reference):
    """bpb = summed NLL / (ln 2 x bytes) and ppl = e^(mean token NLL), recomputed independently
    with transformers' eager model over the windows written out; every length scores the same
    tokens and bytes."""
    from lexkit.model import hf

    model = hf.load(saved["llama"])
    assert not model.training and not model.hf.training  # hf.load: in eval mode, the wrapper and the model
    report = evaluate(model, [CORPUS, CORPUS[100:]], [16, 32, 48], ["causal", "window:8"])
    assert not model.training and not model.hf.training  # and left so by the instrument
    eager = reference("llama")
    ids, nbytes = zip(*(model.encode(d) for d in (CORPUS, CORPUS[100:])))
    rows = {(r["length"], r["pattern"]): r for r in report["results"]}
    assert {r["tokens"] for r in report["results"]} == {2 * 48}
    assert {r["bytes"] for r in report["results"]} == {int(nbytes[0][:48].sum() + nbytes[1][:48].sum())}
    nll = 0.0
    for doc in ids:  # length 16: windows at 0, 16, 32 (non-overlapping, 48 = 3 x 16)
        for start in (0, 16, 32):
            x = doc[start : start + 16][None]
            y = doc[start + 1 : start + 17]
            with torch.no_grad():
                logits = eager(x).logits[0].double()
            nll += float(torch.nn.functional.cross_entropy(logits, y, reduction="sum"))
    r = rows[(16, "causal")]
    assert r["bpb"] == pytest.approx(nll / r["bytes"] / math.log(2), rel=1e-5)
    assert r["ppl"] == pytest.approx(math.exp(nll / r["tokens"]), rel=1e-5)
    # loss by position: byte-weighted buckets recombine to the whole
    buckets = [b for b in report["by_position"] if b["length"] == 48 and b["pattern"] == "causal"]
    assert sum(b["bytes"] for b in buckets) == rows[(48, "causal")]["bytes"]
    total = sum(b["bpb"] * b["bytes"] for b in buckets) / rows[(48, "causal")]["bytes"]
    assert total == pytest.approx(rows[(48, "causal")]["bpb"], rel=1e-9)
    assert [(b["from"], b["to"]) for b in buckets][-2:] == [(16, 32), (32, 48)]  # train_len 32 is an edge
    assert [b["beyond_train"] for b in buckets][-1] is True
    # window:8 = causal at length 8 or less, differs beyond
    assert rows[(16, "window:8")]["bpb"] != rows[(16, "causal")]["bpb"]


def test_evaluate_reports_lengths_a_family_cannot_run(saved):
    from lexkit.core.errors import DataError
    from lexkit.model import hf

    model = hf.load(saved["gpt2"])  # 48 learned positions
    report = evaluate(model, [CORPUS], [32, 64])
    by = {r["length"]: r for r in report["results"]}
    assert by[32]["bpb"] is not None and by[64]["bpb"] is None
    assert "learned positions 0..47" in by[64]["unavailable"]
    with pytest.raises(ValueError, match="no requested length can run"):
        evaluate(model, [CORPUS], [64])
    with pytest.raises(DataError, match="no document has 100,000 tokens to score .* the longest has"):
        evaluate(model, [CORPUS], [100_000])


# -- resolution -----------------------------------------------------------------------------------
def test_analytic_curve_of_rope_families(loaded):
    """Llama: lexkit's own analytic rope curve, (2/sqrt(h)) sum_i cos(n theta_i). GPT-NeoX
    (a quarter of the dims rotated): (sum over r/2 pairs of 2 cos(n theta_i) + h - r)/sqrt(h)."""
    llama = loaded("llama")
    ours = resolution.model_curve(llama, 64)
    ref = resolution.analytic_curve("rope", 64, heads=4, head_dim=8)
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-6)
    neox = loaded("gpt_neox")
    h, r = 8, 2
    n = torch.arange(64, dtype=torch.float64)
    theta = 10000.0 ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)
    expected = (2 * torch.cos(n[:, None] * theta).sum(-1) + (h - r)) / math.sqrt(h)
    torch.testing.assert_close(resolution.model_curve(neox, 64)[0], expected, rtol=1e-6, atol=1e-6)
    windowed = resolution.model_curve(llama, 64, "window:16")
    assert torch.isinf(windowed[:, 16:]).all() and torch.equal(windowed[:, :16], ours[:, :16])


def test_analytic_curve_yarn_scales_by_the_attention_factor(tf, saved):
    """YaRN multiplies cos and sin by a = 0.1 ln s + 1: s[0] = a^2 h / sqrt(h)."""
    from lexkit.model import hf

    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}
    model = hf.load(saved["llama"], rope_scaling=yarn)
    a = 0.1 * math.log(4.0) + 1
    assert float(resolution.model_curve(model, 32)[0, 0]) == pytest.approx(a * a * 8 / math.sqrt(8), rel=1e-6)


def test_analytic_curve_of_bloom_is_its_alibi(loaded):
    """s[n] = -slope_h n (+ a constant, which R ignores) with Bloom's own slopes."""
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

    curve = resolution.model_curve(loaded("bloom"), 20)
    slopes = _get_alibi_slopes(4, torch.device("cpu")).double()
    expected = -slopes[:, None] * torch.arange(20, dtype=torch.float64)
    torch.testing.assert_close(curve - curve[:, :1], expected, rtol=1e-6, atol=1e-6)


def test_analytic_curve_of_gpt2_uses_its_position_table(loaded):
    """s[n] = mean over m of p_m . p_(m-n) / sqrt(d_model), p = the model's wpe rows."""
    model = loaded("gpt2")
    p = model.hf.transformer.wpe.weight.detach().double()[:12]
    expected = torch.stack([(p[n:] * p[: 12 - n]).sum(-1).mean() for n in range(12)]) / math.sqrt(32)
    torch.testing.assert_close(resolution.model_curve(model, 12)[0], expected, rtol=1e-5, atol=1e-7)
    doc = resolution.analytic(model, [12, 64])
    assert doc["results"][0]["resolution"] is not None
    assert doc["results"][1]["resolution"] is None and "learned positions" in doc["results"][1]["note"]


def test_empirical_entropy_matches_transformers_attention_weights(saved, reference, tmp_path):
    """lexkit.resolution.empirical takes an HFModel as it is; its entropy per layer and head
    equals the entropy of transformers' own eager attention weights (output_attentions)."""
    from lexkit.model import hf

    model = hf.load(saved["qwen2"])
    toks = resolution.texts([CORPUS, CORPUS[50:]], 24, 2, model=model)
    assert toks.shape == (2, 24) and (toks[:, 0] == 0).all()  # BOS first
    doc = resolution.empirical(model, toks, "causal")
    with torch.no_grad():
        probs = reference("qwen2")(toks, output_attentions=True).attentions  # L x [b, H, n, n]
    for layer, p in enumerate(probs):
        ent = -torch.special.xlogy(p.double(), p.double()).sum(-1).mean((0, 2))  # [H]
        ours = torch.tensor(doc["entropy_per_head"][layer], dtype=torch.float64)
        torch.testing.assert_close(ours, ent, rtol=1e-4, atol=1e-5)
    assert all(0 <= r <= 1 for r in doc["per_layer"])
    data = tmp_path / "doc.txt"
    data.write_bytes(CORPUS)
    run = resolution.empirical_run(f"hf:{saved['qwen2']}", [16, 24], texts_per_length=1, data=str(data))
    assert [r["length"] for r in run["results"]] == [16, 24] and run["layers"] == 2


# -- the command line ---------------------------------------------------------------------------------
def test_cli_eval_and_resolution(saved, tmp_path, capsys, request):
    import json

    from lexkit.cli import main
    from lexkit.model import hf

    data = tmp_path / "doc.txt"
    data.write_bytes(CORPUS)
    out = tmp_path / "r.json"
    code = main(["eval", f"hf:{saved['llama']}", "--data", str(data), "--lengths", "16,32", "--pattern", "causal",
                 "--pattern", "window:8", "--json", str(out), "--csv", str(tmp_path / "r.csv"),
                 "--plot", str(tmp_path / "r.png"), "--no-progress"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "bits per byte" in text and "token perplexity" in text and "window:8" in text
    report = json.loads(out.read_text())
    direct = evaluate(hf.load(saved["llama"]), [CORPUS], [16, 32], ["causal", "window:8"])
    assert [r["bpb"] for r in report["results"]] == pytest.approx([r["bpb"] for r in direct["results"]], rel=1e-12)
    assert (tmp_path / "r.png").stat().st_size > 0 and (tmp_path / "r.csv").read_text().startswith("length,pattern")

    code = main(["resolution", f"hf:{saved['llama']}", "--data", str(data), "--lengths", "16,32", "--texts", "1",
                 "--json", str(tmp_path / "res.json")])  # (its figure, the empirical curves: the slow test below)
    text = capsys.readouterr().out
    assert code == 0 and "analytic" in text and "layer 1" in text and "entropy" in text
    doc = json.loads((tmp_path / "res.json").read_text())
    assert len(doc["empirical"]["results"][0]["per_layer"]) == 2

    # Bloom's figure drawn but not rendered (0.3 s of matplotlib's layout and Agg): it is the analytic figure,
    # which test_resolution.py's test_cli_analytic_writes_json_and_png renders; written under the name given
    request.getfixturevalue("unrendered")
    bloom = tmp_path / "bloom.png"
    assert main(["resolution", f"hf:{saved['bloom']}", "--lengths", "16", "--plot", str(bloom)]) == 0
    assert "empirical: n/a" in capsys.readouterr().out  # no score hook: the figure is the analytic curve
    assert bloom.read_bytes() == b"unrendered"


# ~0.3 s, matplotlib's layout of one more figure. Fast siblings: Bloom's figure above (an hf model's resolution
# figure, drawn by the same instrument; the analytic figure rendered: test_resolution.py's
# test_cli_analytic_writes_json_and_png) and test_resolution.py's test_cli_empirical_run_dir (the empirical
# curves' figure, drawn from the document empirical_run writes for an hf model as for a run)
@pytest.mark.slow
def test_cli_resolution_figure_of_an_hf_model_with_a_score_hook(tf, saved, tmp_path, capsys):
    from lexkit.cli import main

    data, png = tmp_path / "doc.txt", tmp_path / "res.png"
    data.write_bytes(CORPUS)
    assert main(["resolution", f"hf:{saved['llama']}", "--data", str(data), "--lengths", "16,32", "--texts", "1",
                 "--plot", str(png)]) == 0
    assert "empirical" in capsys.readouterr().out and png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("argv, message", [
    (["eval", "hf:{llama}", "--rope-scaling", "warp:2", "--lengths", "8"], "unknown rope scaling type 'warp'"),
    (["eval", "hf:{llama}", "--max-bytes", "10", "--lengths", "8", "--data", "{data}"], "--max-tokens"),
    (["eval", "hf:{missing}", "--lengths", "8"], "cannot load a model config"),
    (["resolution", "hf:{llama}", "--scheme", "rope"], "--scheme"),
])
def test_cli_errors_are_one_line(tf, saved, tmp_path, capsys, argv, message):
    from lexkit.cli import main

    data = tmp_path / "doc.txt"  # (refused after the documents are read: these, not the standard library's)
    data.write_bytes(CORPUS)
    argv = [a.format(llama=saved["llama"], missing=tmp_path / "none", data=data) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and message in err[0]


def test_a_model_that_bypasses_lexkit_is_an_error_not_a_silent_causal_run(tf, saved):
    from lexkit.model import hf

    model = hf.load(saved["llama"])
    model.hf.set_attn_implementation("eager")
    with pytest.raises(ValueError, match="did not call lexkit's attention and mask function"):
        model(_ids(8), pattern="window:4")


def check_flex_against_dense(path) -> None:
    from lexkit.model import hf

    model = hf.load(path)
    x = _ids(64)
    with torch.no_grad():
        for pattern in ("window:8", "bca:16"):
            torch.testing.assert_close(model(x, pattern=pattern, kernel="flex"),
                                       model(x, pattern=pattern, kernel="dense"), atol=1e-5, rtol=0)


# ~1 s: a dynamo trace of eager flex per pattern. Fast siblings: test_chunked_kernel_matches_eager_across_blocks
# (an hf model's kernel choice reaching lexkit's kernels, GQA's heads expanded before any kernel) and
# test_kernels.py's test_eager_flex_forward_and_gradients_match_reference (flex under window and BCA)
@pytest.mark.slow
def test_flex_kernel_run_eagerly_matches_dense(tf, saved, eager_flex):
    """lexkit's flex path under window and BCA on a GQA model, FlexAttention run eagerly (compiled
    flex is refused on the CPU)."""
    check_flex_against_dense(saved["mistral"])


# -- every number true: state, refusals and labels ---------------------------------------------------
@pytest.fixture(scope="module")
def sharp(tf, tmp_path_factory):
    """A tiny Llama with large weights (initializer_range=0.3), so that a change of RoPE
    frequencies shows in its logits and scores."""
    config = tf.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, max_position_embeddings=32, initializer_range=0.3, **SMALL)
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("sharp")
    tf.AutoModelForCausalLM.from_config(config).save_pretrained(path)
    _tokenizer(tf).save_pretrained(path)
    return path


def test_dynamic_ntk_runs_at_the_length_asked_whatever_ran_before(tf, sharp):
    """transformers' dynamic RoPE keeps the frequencies of the longest call so far; a call at 64
    after one at 128 must equal a call at 64 on a fresh model (and transformers' own eager model
    called at 64 first)."""
    from lexkit.model import hf

    x64, x128 = _ids(64, batch=1), _ids(128, batch=1, seed=2)
    with torch.no_grad():
        fresh = hf.load(sharp, rope_scaling="dynamic:4")(x64)
        model = hf.load(sharp, rope_scaling="dynamic:4")
        model(x128)
        again = model(x64)
        eager = _eager(tf, sharp, rope_parameters={"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0})
        theirs = eager(x64).logits
    torch.testing.assert_close(fresh, theirs, atol=1e-4, rtol=0)
    torch.testing.assert_close(again, fresh, atol=1e-5, rtol=0)


def test_dynamic_ntk_eval_and_resolution_give_the_same_numbers_in_any_order(tf, sharp, tmp_path, capsys):
    import json

    from lexkit.cli import main

    data = tmp_path / "doc.txt"
    data.write_bytes(CORPUS)
    common = ["--rope-scaling", "dynamic:4", "--data", str(data)]
    r = {}
    for lengths in ("64", "64,128"):
        out = tmp_path / f"res{lengths}.json"
        argv = ["resolution", f"hf:{sharp}", "--lengths", lengths, "--texts", "1", "--json", str(out), *common]
        assert main(argv) == 0
        doc = json.loads(out.read_text())
        r[lengths] = (doc["analytic"]["results"][0]["resolution"], doc["empirical"]["results"][0]["resolution"])
    assert r["64"] == pytest.approx(r["64,128"], rel=1e-9)
    from lexkit.model import hf

    model = hf.load(sharp, rope_scaling="dynamic:4")
    with torch.no_grad():
        model(_ids(128, batch=1))  # a longer call first
    from lexkit.evaluate import evaluate

    after = evaluate(model, [CORPUS], [64])["results"][0]["bpb"]
    alone = evaluate(hf.load(sharp, rope_scaling="dynamic:4"), [CORPUS], [64])["results"][0]["bpb"]
    assert after == pytest.approx(alone, rel=1e-9)
    capsys.readouterr()


@pytest.mark.parametrize("argv, message", [
    (["eval", "hf:{llama}", "--lengths", "16", "--pattern", "sinks:8,pos=cache"], "pos=cache"),
    (["eval", "hf:{llama}", "--lengths", "16", "--stream"], "--stream"),
    (["resolution", "hf:{llama}", "--lengths", "16", "--logn"], "--logn"),
    (["resolution", "hf:{llama}", "--lengths", "16", "--train-len", "8"], "--train-len"),
    (["eval", "hf:{truncated}", "--lengths", "16"], "model.safetensors"),
    (["eval", "hf:{llama}", "--lengths", "100000"], "the longest has "),
])
def test_what_an_hf_model_cannot_honour_is_refused_by_name(saved, loaded, tmp_path, capsys, argv, message):
    from cli_checks import one_error_line
    from lexkit.cli import main

    truncated = tmp_path / "truncated"
    truncated.mkdir()
    for f in saved["llama"].iterdir():
        (truncated / f.name).write_bytes(f.read_bytes())
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    data = tmp_path / "doc.txt"
    data.write_bytes(CORPUS)
    argv = [a.format(llama=saved["llama"], truncated=truncated) for a in argv] + ["--data", str(data)]
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert message in line, line
    if message == "the longest has ":  # how long the longest tokenized document was
        longest = loaded("llama").encode(CORPUS)[0].numel() - 1
        assert f"the longest has {longest:,}" in line


def test_the_eval_report_and_csv_record_what_ran(tf, saved, tmp_path, capsys):
    import csv

    from lexkit.cli import main

    data = tmp_path / "doc.txt"
    data.write_bytes(CORPUS)
    out = tmp_path / "r.csv"
    assert main(["eval", f"hf:{saved['llama']}", "--data", str(data), "--lengths", "16", "--csv", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert rows[0]["label"].startswith("llama: rope") and rows[0]["scheme"] == "" and rows[0]["logn"] == "False"
    assert rows[0]["streamed"] == "False" and rows[0]["tokens"] == str(int(rows[0]["tokens"]))
    capsys.readouterr()


def test_eval_of_a_run_and_of_an_hf_model_go_through_one_function(tf, saved, tmp_path, capsys, monkeypatch):
    """`lexkit eval hf:PATH` and `lexkit eval runs/x` both call the evaluation instrument's evaluate_run:
    patched once, it sees both targets (and both still produce their reports through it)."""
    import lexkit.instruments.evaluate as ev
    from lexkit.cli import main
    from lexkit.training.runs import save_weights, write_json

    run = tmp_path / "run"
    run.mkdir()
    gpt = tiny_gpt("rope", n_layers=1, d_model=16, train_len=8, seed=None)
    save_weights(run, gpt)
    write_json(run / "config.json", {"model": __import__("dataclasses").asdict(gpt.cfg), "data": {"spec": "stdlib"}})
    data = tmp_path / "doc.txt"
    data.write_bytes(CORPUS)
    seen = []
    original = ev.evaluate_run

    def spy(target, **kwargs):
        seen.append(str(target))
        return original(target, **kwargs)

    monkeypatch.setattr(ev, "evaluate_run", spy)
    for target in (f"hf:{saved['llama']}", str(run)):
        assert main(["eval", target, "--lengths", "16", "--data", str(data), "--no-progress"]) == 0
    assert seen == [f"hf:{saved['llama']}", str(run)]
    out = capsys.readouterr().out
    assert "token perplexity" in out and f"run {run}" in out


def test_the_subject_of_an_hf_model(tf, saved):
    """lexkit.load("hf:PATH"): the same protocol as a run's subject, in tokens; generation runs
    plain forward passes (no lexkit KV cache for a transformers model) and refuses a forced one."""
    import lexkit

    subject = lexkit.load(f"hf:{saved['llama']}")
    tokens, nbytes = subject.encode(VOCAB_TEXT[0])
    assert subject.decode(tokens) == VOCAB_TEXT[0].encode() and int(nbytes.sum()) == len(VOCAB_TEXT[0].encode())
    assert subject.model.cache_refusal() and subject.default_lengths() == [16, 32, 64, 128]
    assert subject.describe()["label"].startswith("llama: rope") and subject.train_len == 32
    assert "scheme" not in subject.describe()  # a label for tables, not a lexkit scheme spec
    greedy = subject.generate(tokens, 4)
    context = tokens.clone()
    with torch.no_grad():
        for _ in range(4):
            context = torch.cat((context, subject.model(context[None])[0, -1].argmax()[None]))
    assert greedy.tolist() == context[-4:].tolist()
    with pytest.raises(ValueError, match="--scheme is for lexkit runs"):
        lexkit.load(f"hf:{saved['llama']}", scheme="rope")


# -- retrieval through a tokenizer model ----------------------------------------------------------
def _sentencepiece(tf, decoder: str):
    """A tiny SentencePiece-style tokenizer, built here (no download): words start with ``▁``
    (Metaspace pre-tokenizer), and the decoder drops the leading space of the first token it
    decodes, as Mistral's Metaspace decoder and Llama 2's ``Replace, Fuse, Strip`` do."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from lexkit import tasks

    texts = [tasks.GRASS, tasks.PASSKEY_TASK, tasks.PASSKEY_NEEDLE.format(k=12345), tasks.PASSKEY_QUESTION + " 4",
             "0123456789 " * 3]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = (decoders.Metaspace(replacement="▁", prepend_scheme="first") if decoder == "metaspace" else
                   decoders.Sequence([decoders.Replace("▁", " "), decoders.Fuse(), decoders.Strip(" ", 1, 0)]))
    alphabet = sorted(set("".join(texts)) | {"▁"})
    trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=["<s>", "</s>"], initial_alphabet=alphabet)
    tok.train_from_iterator(texts * 3, trainer=trainer)
    return tf.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")


@pytest.fixture(scope="module")
def spiece(tf, tmp_path_factory):
    """decoder -> directory of a tiny Llama (trained length 64 tokens) with a SentencePiece-style tokenizer."""
    out = {}
    for decoder in ("metaspace", "strip"):
        tokenizer = _sentencepiece(tf, decoder)
        config = tf.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                num_key_value_heads=2, max_position_embeddings=64, vocab_size=len(tokenizer),
                                bos_token_id=0, eos_token_id=1)
        torch.manual_seed(0)
        path = tmp_path_factory.mktemp(f"spiece-{decoder}")
        tf.AutoModelForCausalLM.from_config(config).save_pretrained(path)
        tokenizer.save_pretrained(path)
        out[decoder] = path
    return out


def _oracle(answer: list[int], eos: int):
    """A greedy decoder that emits exactly ``answer``, then end of text."""
    def greedy(tokens, **options):
        yield from answer
        while True:
            yield eos
    return greedy


@pytest.mark.parametrize("which", ["metaspace", "strip", "byte-level"])
def test_an_oracle_that_emits_the_answer_tokens_scores_right(tf, spiece, saved, which):
    """The standard answer keeps its leading space (" 48740"); a SentencePiece decoder drops the
    first token's, so the generated tokens decoded alone scored every answer wrong (the models of
    the Landmark / LongLoRA / YaRN passkey figures). Decoded after the prompt, as the papers
    compare, an oracle scores right with every tokenizer."""
    import lexkit
    from lexkit import retrieval, tasks

    subject = lexkit.load(f"hf:{saved['llama'] if which == 'byte-level' else spiece[which]}")
    doc = tasks.make("passkey", 400, 50, haystack=None, style="standard")
    ids, _ = subject.encode(doc.text)
    prompt, _ = subject.encode(doc.prompt)
    assert torch.equal(ids[: prompt.numel()], prompt) and doc.expected.startswith(b" ")
    answer = ids[prompt.numel():].tolist()  # the tokens of " 48740" after the prompt's
    if which != "byte-level":
        assert subject.decode(torch.tensor(answer)) == doc.expected[1:]  # decoded alone: the space is gone
    subject.greedy = _oracle(answer, subject.model.tokenizer.eos_token_id)
    right, produced = retrieval.exact_match(subject, doc, subject.model.pattern("causal"))
    assert right and produced == doc.expected


def test_hf_retrieval_lengths_are_tokens(tf, spiece, tmp_path, capsys):
    """A tokenizer model's lengths count tokens, as `lexkit eval hf:` does: each document is the
    longest whose tokens the model reads are at most the length (columns "2x .. 16x" held 0.85x to
    6.4x when lengths were bytes)."""
    import json

    import lexkit
    from lexkit import retrieval
    from lexkit.cli import main

    subject = lexkit.load(f"hf:{spiece['metaspace']}")
    for length in (150, 300):
        docs = retrieval.cell_documents(subject, "passkey", length, 50, 3, haystack=None)
        read = [retrieval.read_tokens(subject, d.text) for d in docs]
        assert all(length - 3 <= n <= length for n in read), read
        longer = [retrieval.read_tokens(subject, d.text + b" x") for d in docs]  # a word more is too long
        assert all(n > length - 3 for n in longer)
    assert 40 < retrieval.minimum_length(subject, "passkey") < 100  # tokens, not bytes (300)
    with pytest.raises(ValueError, match=r"length 40 is shorter than the passkey needle and question \(\d\d tokens\)"):
        retrieval.cell_documents(subject, "passkey", 40, 50, 1, haystack=None)

    argv = ["retrieval", f"hf:{spiece['metaspace']}", "--task", "passkey", "--lengths", "128,256", "--depths", "50",
            "--samples", "2", "--json", str(tmp_path / "r.json"), "--device", "cpu"]
    assert main(argv) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["unit"] == "tokens" and report["lengths"] == [128, 256] and report["train_len"] == 64
    assert [r["length"] for r in report["rows"]] == [128, 256]
    assert all(r["length"] - 3 <= r["tokens"] <= r["length"] for r in report["rows"])
    out = capsys.readouterr().out
    assert "lengths in tokens" in out and "128 (2x)" in out and "256 (4x)" in out


@pytest.mark.parametrize("task, size, digits", [("passkey", 8, 8), ("multikey", 4, 4), ("multikey", None, 7)])
def test_hf_retrieval_honours_size(spiece, tmp_path, monkeypatch, task, size, digits):
    """--size was ignored for hf: passkey above 5 digits and for hf: multikey while the JSON
    recorded it: the documents the command scores (each cell's, as it builds them) hold answers of
    that many digits."""
    import json

    from lexkit.cli import main
    from lexkit.instruments.retrieval import cells

    scored, build = [], cells.cell_documents

    def spy(*args, **kwargs):
        docs = build(*args, **kwargs)
        scored.extend(docs)
        return docs

    monkeypatch.setattr(cells, "cell_documents", spy)
    argv = ["retrieval", f"hf:{spiece['metaspace']}", "--task", task, "--lengths", "400", "--depths", "50",
            "--samples", "2", "--json", str(tmp_path / "r.json"), "--device", "cpu"]
    assert main(argv + (["--size", str(size)] if size else [])) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["size"] == size and report["rows"][0]["chance_bits"] == pytest.approx(math.log2(10 if task ==
                                                                                                  "passkey" else 9))
    assert len(scored) == 2  # the one cell's two documents
    for doc in scored:
        assert len(doc.expected) == 1 + digits and doc.expected[1:].isdigit()
        assert doc.text[doc.needle[0]:doc.needle[1]] == doc.expected[1:]
