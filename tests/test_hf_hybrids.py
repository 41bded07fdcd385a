"""lexkit.model.hf on the hybrids: Hugging Face families whose layers differ (Gemma 2/3, GPT-OSS, Llama 4,
Cohere 2, SmolLM3, Qwen3), offline.

Tiny random models of each family (tests/fixtures/tiny_hf.py: windows and chunks of 8, a training
length of 32) are compared with transformers' own eager attention below and above the window, the
chunk and the training length; per-layer overrides with transformers run with the layer types
changed in its config. Gemma 2 runs in the fast suite with the override semantics; the other
families' end-to-end checks are slow, their per-layer rules (config -> layers), the mask reading
and the attention function's sinks and soft-capping checked fast without building a model.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch

from lexkit.evaluate import evaluate
from tiny_hf import CORPUS, TRAIN, W, eager, hybrid_configs, ids, other_configs, save, tokenizer

pytestmark = pytest.mark.xdist_group("hf")


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def configs(tf):
    """model type -> its tiny config (read them only: a test that changes one builds its own). Qwen's MoE
    configs with 4 experts of 64, not their 60 and 128 of 1,408 and 768 (35M parameters, 0.3 s a model
    built): the experts are the MLP's, which no rule of the layout reads."""
    out = {**hybrid_configs(tf), **other_configs(tf)}
    small = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64)
    for name, more in (("qwen2_moe", dict(shared_expert_intermediate_size=64)), ("qwen3_moe", {})):
        out[name] = type(out[name])(**{**out[name].to_dict(), **small, **more})
    return out


@pytest.fixture(scope="module")
def built(tf, configs, tmp_path_factory):
    """model type -> the directory of its tiny hybrid, saved on first use."""
    tok, done = tokenizer(tf), {}

    def get(name: str):
        if name not in done:
            done[name] = save(tf, configs[name], tmp_path_factory.mktemp(name), tok)
        return done[name]

    return get


@pytest.fixture(scope="module")
def gemma2(tf, built):
    """(lexkit's Gemma 2, transformers' eager one as configured), each loaded once for the tests that only run
    forward passes through them (lexkit's pattern, kernel and hook are a call's, never kept in the model); an
    instrument's eval_mode changes lexkit's, so a test that hands it to one loads its own."""
    from lexkit.model import hf

    return hf.load(built("gemma2")), eager(tf, built("gemma2"))


# -- every layer read from the config ------------------------------------------------------------------
LAYOUTS = {  # the families' per-layer rules, written out for the tiny configs
    "gemma2": "(rope:base=10000@window:8+softcap:1;rope:base=10000@causal+softcap:1)x2",
    "gemma3_text": "(rope:base=10000@window:8)x5;rope:base=1000000@causal",
    "gpt_oss": "(rope:base=150000,scaling=yarn,factor=2@window:8+sink;"
               "rope:base=150000,scaling=yarn,factor=2@causal+sink)x2",
    "llama4_text": "(rope:base=500000@chunk:8)x3;none@causal+llama4:floor=8",
    "cohere2": "(rope:base=10000@window:8)x3;none@causal",
    "smollm3": "(rope:base=2000000@causal)x3;none@causal",
    "qwen3": "(rope:base=10000@causal)x2;(rope:base=10000@window:8)x2",
}
OTHERS = {  # the same rules in other model types (None: every layer RoPE under causal attention)
    "mixtral": "(rope:base=1000000@window:8)x4", "phi3": "(rope:base=10000@window:8)x4",
    "starcoder2": "(rope:base=10000@window:8)x4", "qwen3_moe": "(rope:base=10000@window:8)x4",
    "qwen2_moe": "rope:base=10000@window:8;(rope:base=10000@causal)x3",  # odd layers below max_window_layers
    "olmo3": "(rope:base=500000@window:8)x3;rope:base=500000@causal",
    "exaone4": "(rope:base=10000@window:8)x3;none@causal",  # with a window, RoPE on the window layers only
    "vaultgemma": "(rope:base=10000@window:8+softcap:50;rope:base=10000@causal+softcap:50)x2",
    "gemma": None, "olmo2": None, "granite": None, "cohere": None,
}


@pytest.mark.parametrize("name", list(LAYOUTS) + list(OTHERS))
def test_every_layer_is_read_from_the_config(configs, name):
    """Gemma 2: sliding every other layer, logits capped; Gemma 3: five local per global, a base per
    type; GPT-OSS: alternating, a sink per head; Llama 4: chunked RoPE layers, every 4th NoPE with
    the temperature; Cohere 2: window RoPE layers, every 4th full NoPE; SmolLM3: no_rope_layers;
    Qwen3: window layers from max_window_layers on."""
    from lexkit.model.hf import MODEL_TYPES, layers_of
    from lexkit.model.hf.model import describe_config
    from lexkit.model.hf.model_types import layout_text

    config = configs[name]
    layers = layers_of(config, MODEL_TYPES[name])
    assert describe_config(config, MODEL_TYPES[name], None, layers).layout == {**LAYOUTS, **OTHERS}[name]
    if name in LAYOUTS:
        assert layout_text(layers) == LAYOUTS[name]
        assert [layer.type for layer in layers] == list(config.layer_types)
        assert [layer.scope for layer in layers] == ["global" if t == "full_attention" else "local"
                                                    for t in config.layer_types]


def test_own_mask_reads_transformers_mask_functions(tf):
    from transformers.masking_utils import (
        bidirectional_mask_function,
        causal_mask_function,
        chunked_causal_mask_function,
        sliding_window_causal_mask_function,
    )

    from lexkit.model.hf import own_mask

    assert own_mask(causal_mask_function, None).spec == "causal"
    assert own_mask(sliding_window_causal_mask_function(8), 8).spec == "window:8"
    assert own_mask(chunked_causal_mask_function(8, torch.zeros(1, dtype=torch.long)), 8).spec == "chunk:8"
    with pytest.raises(ValueError, match="neither causal, a causal sliding window nor causal chunks"):
        own_mask(bidirectional_mask_function, None)


def test_the_attention_function_is_transformers_eager_with_sinks_and_soft_capping(tf):
    """lexkit's attention function (GQA, the model's scaling, a window mask) against GPT-OSS's eager
    attention with its sink logits and Gemma 2's with its soft cap, called directly."""
    from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward as gemma2
    from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward as gpt_oss

    from lexkit.attention.patterns import Window
    from lexkit.model import hf

    torch.manual_seed(3)
    n, heads, d = 20, 4, 8
    q, k, v = 3 * torch.randn(1, heads, n, d), 3 * torch.randn(1, 2, n, d), torch.randn(1, 2, n, d)
    module = SimpleNamespace(layer_idx=0, num_key_value_groups=2, sinks=torch.randn(heads), training=False,
                             head_dim=d)
    own = Window(W=W)
    idx = torch.arange(n)
    additive = torch.zeros(n, n).masked_fill(~own.visible(idx[:, None], idx[None, :]), -math.inf)[None, None]
    with torch.no_grad():
        ours = hf.attention(module, q, k, v, own, scaling=0.3, s_aux=module.sinks, position_ids=idx[None])[0]
        torch.testing.assert_close(ours, gpt_oss(module, q, k, v, additive, scaling=0.3)[0], atol=1e-5, rtol=0)
        ours = hf.attention(module, q, k, v, own, scaling=0.3, softcap=1.0, sliding_window=W)[0]
        theirs = gemma2(module, q, k, v, additive, scaling=0.3, softcap=1.0)[0]
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)
        assert (theirs - gemma2(module, q, k, v, additive, scaling=0.3)[0]).abs().max() > 1e-2  # the cap shows
    with pytest.raises(ValueError, match="passes alibi_slopes to its attention function"):
        hf.attention(module, q, k, v, own, scaling=0.3, alibi_slopes=torch.ones(heads))
    with pytest.raises(ValueError, match="sliding_window=4 but its mask is window:8"):
        hf.attention(module, q, k, v, own, sliding_window=4)


#: (pad, bos, eos) a family's models use where the tiny vocabulary of 300 holds them: Gemma's configs pad with 0
#: (eos 1, bos 2), Cohere's pad with 0 (bos 5); every other family here with pad 0 as a fine-tune that pads
#: with id 0 writes it (transformers zeroes the row of padding_idx = pad_token_id, and it never gets a gradient)
SPECIALS = {name: (0, 2, 1) for name in ("gemma2", "gemma3_text", "vaultgemma", "gemma")} | {
    "cohere2": (0, 5, 1), "cohere": (0, 5, 1)}


@pytest.mark.parametrize("name", ["llama"] + list(LAYOUTS) + list(OTHERS))
def test_a_model_whose_pad_token_is_id_0_loads(tf, configs, name):
    """The layout check at load probes with a token that is no special token and whose embedding
    row is not zero: with pad_token_id = 0 the row of id 0 is zero, its query zero at every
    position, so a probe with id 0 read every RoPE layer as unrotated and refused the model."""
    from lexkit.model.hf import MODEL_TYPES
    from lexkit.model.hf.interface import ATTN, register
    from lexkit.model.hf.model import HFModel

    register()
    config = (tf.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                             vocab_size=300) if name == "llama" else configs[name].__class__(**configs[name].to_dict()))
    config.pad_token_id, config.bos_token_id, config.eos_token_id = SPECIALS.get(name, (0, 0, 1))
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(config, attn_implementation=ATTN).eval()
    assert not model.get_input_embeddings().weight[0].any()  # the pad row as every such model has it
    loaded = HFModel(model, None, MODEL_TYPES[name], f"hf:{name}")  # verify_layout runs here
    specials = set(SPECIALS.get(name, (0, 0, 1)))
    assert loaded.probe_token() not in specials and model.get_input_embeddings().weight[loaded.probe_token()].any()


@pytest.mark.parametrize("family, message", [
    (dict(rope_layers="sliding", softcap=True),
     r"layer 1 reaches attention as \(mask, softcap, sink, RoPE\) = \('causal', 1.0, False, True\), "
     r"but lexkit read \('causal', 1.0, False, False\)"),
    (dict(), r"layer 0 .* \('window:8', 1.0, False, True\), but lexkit read \('window:8', None, False, True\)"),
])
def test_a_rule_read_wrong_is_an_error_when_the_model_loads(tf, built, monkeypatch, family, message):
    """The two probe passes at load check lexkit's reading of every layer against the model: here a
    Gemma 2 read as RoPE on its sliding layers only, or without its soft cap."""
    from lexkit.core.errors import LexkitError
    from lexkit.model import hf
    from lexkit.model.hf import model_types

    monkeypatch.setitem(model_types.MODEL_TYPES, "gemma2", model_types.ModelType("rope", True, **family))
    with pytest.raises(LexkitError, match=message):
        hf.load(built("gemma2"))


# -- Gemma 2 end to end (fast) ----------------------------------------------------------------------
def check_parity(tf, path, monkeypatch, dropped=None, loaded=None) -> None:
    """lexkit's logits on the dense and chunked kernels (query blocks of 16) = transformers' eager
    model at 6 and 40 tokens (below and above the windows and chunks of 8 and the training length of
    32); ``dropped(path)``: transformers without the family's rule, which must differ; ``loaded``: the
    two models of ``path`` where they are loaded already."""
    from lexkit.attention import kernels
    from lexkit.model import hf

    monkeypatch.setattr(kernels.step, "CHUNK", 16)
    model, reference = loaded or (hf.load(path), eager(tf, path))
    with torch.no_grad():
        for n in (6, 40):
            x = ids(n)
            theirs = reference(x).logits
            for kernel in ("dense", "chunked"):
                torch.testing.assert_close(model(x, kernel=kernel), theirs, atol=1e-4, rtol=0)
        if dropped is not None:
            assert (dropped(path)(x).logits - theirs).abs().max() > 1e-3  # the rule shows at 40 tokens


def test_gemma2_reproduces_transformers_eager(tf, built, gemma2, monkeypatch):
    check_parity(tf, built("gemma2"), monkeypatch, lambda path: eager(tf, path, attn_logit_softcapping=None), gemma2)


FULL, SLIDING = "full_attention", "sliding_attention"


@pytest.mark.parametrize("spec, changes", [
    ("global=window:8", dict(layer_types=[SLIDING] * 4)),
    ("local=causal", dict(layer_types=[FULL] * 4)),
    ("sliding_attention=causal;full_attention=window:8", dict(layer_types=[FULL, SLIDING] * 2)),
    ("window:4", dict(layer_types=[SLIDING] * 4, sliding_window=4)),
    ("L1=window:8;L2=causal", dict(layer_types=[SLIDING, SLIDING, FULL, FULL])),
])
def test_overrides_are_transformers_with_the_layer_types_changed(tf, built, gemma2, spec, changes):
    """An override (the grammar of byte runs' layouts) = transformers' eager Gemma 2 whose config
    gives those layers that mask; unqualified, a pattern applies inside every layer's own."""
    x = ids(40)
    with torch.no_grad():
        theirs = eager(tf, built("gemma2"), **changes)(x).logits
        ours = gemma2[0](x, pattern=spec)
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)


def test_an_override_changes_exactly_the_layers_it_names(tf, built):
    """Under L1=window:4 the score hook sees layer 1 under window:4 and every other layer under its
    own mask; the output of layer 0 is unchanged, that of layer 1 changes."""
    from lexkit import attention
    from lexkit.model import hf

    model = hf.load(built("gemma2"))
    x, n = ids(40, batch=1), 40

    def run(spec):
        seen, outs = {}, {}

        def hook(layer, q_idx, k_idx, scores, probs):
            grid = seen.setdefault(layer, torch.zeros(n, n, dtype=torch.bool))
            grid[q_idx[:, None], k_idx[None, :]] = torch.isfinite(scores[0, 0])

        handles = [block.register_forward_hook(lambda m, a, o, i=i: outs.setdefault(i, o[0] if isinstance(o, tuple)
                                                                                     else o))
                   for i, block in enumerate(model.hf.model.layers)]
        with torch.no_grad():
            model(x, pattern=spec, hook=hook)
        for handle in handles:
            handle.remove()
        return seen, outs

    idx = torch.arange(n)
    seen, outs = run("L1=window:4")
    for layer, spec in enumerate(["window:8", "window:4", "window:8", "causal"]):
        assert torch.equal(seen[layer], attention.create(spec).visible(idx[:, None], idx[None, :])), layer
    _, base = run("causal")
    assert torch.equal(outs[0], base[0]) and (outs[1] - base[1]).abs().max() > 1e-4


def test_bpb_is_transformers_own_loss(tf, built, gemma2):
    """bpb and token perplexity of one window of 40 tokens = transformers' own loss (labels=ids), as
    configured and with the global layers under the window."""
    from lexkit.model import hf

    model, configured = hf.load(built("gemma2")), gemma2[1]  # (evaluate's eval_mode changes lexkit's model)
    report = evaluate(model, [CORPUS], [40], ["causal", "global=window:8"])
    tokens, nbytes = model.encode(CORPUS)
    x = tokens[:41][None]
    for row, theirs in zip(report["results"], (configured, eager(tf, built("gemma2"), layer_types=[SLIDING] * 4))):
        with torch.no_grad():
            loss = float(theirs(x, labels=x).loss)  # mean NLL of tokens 1..40
        assert row["ppl"] == pytest.approx(math.exp(loss), rel=1e-5)
        assert row["bpb"] == pytest.approx(loss * 40 / (int(nbytes[:40].sum()) * math.log(2)), rel=1e-5)
    assert report["results"][0]["bpb"] != report["results"][1]["bpb"]


def test_empirical_resolution_reads_each_layer_under_its_own_mask(tf, built):
    """s_hat per layer: a window layer's is -inf from distance W on, a full layer's (after it, on
    the same blocks of queries and keys) finite at every distance, whatever ran first."""
    from lexkit import resolution
    from lexkit.model import hf

    doc = resolution.empirical(hf.load(built("gemma2")), ids(40, batch=1), "causal")
    curve = doc["curve"]  # [layers, heads, 40]
    assert torch.isinf(curve[0, :, W:]).all() and torch.isfinite(curve[0, :, :W]).all()
    assert torch.isfinite(curve[1]).all() and torch.isfinite(curve[3]).all()


def test_every_instrument_names_the_layout(tf, built, tmp_path, capsys):
    """lexkit eval, resolution and retrieval on the hybrid: the layout and the selectors in every
    header and report; resolution per layer type, analytic per group of equal layers."""
    from lexkit.cli import main

    path, data = built("gemma2"), tmp_path / "doc.txt"
    data.write_bytes(CORPUS)
    layout = LAYOUTS["gemma2"]
    out = tmp_path / "eval.json"
    assert main(["eval", f"hf:{path}", "--data", str(data), "--lengths", "16,40", "--pattern", "causal",
                 "--pattern", "global=window:8", "--json", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert f"layout {layout}  (selectors: sliding_attention, local, full_attention, global" in text
    report = json.loads(out.read_text())
    assert report["layout"] == layout and report["patterns"] == ["causal", "global=window:8"]
    out = tmp_path / "res.json"
    assert main(["resolution", f"hf:{path}", "--data", str(data), "--lengths", "16,40", "--texts", "1",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    for label in ("analytic L0,L2 rope:base=10000@window:8", "analytic L1,L3 rope:base=10000@causal",
                  "layer 1 full_attention", "sliding_attention (mean)", "full_attention (mean)", f"layout {layout}"):
        assert label in text, label
    doc = json.loads(out.read_text())
    per_layer = doc["empirical"]["results"][0]["per_layer"]
    assert doc["per_type"]["full_attention"]["16"] == pytest.approx((per_layer[1] + per_layer[3]) / 2)
    out = tmp_path / "ret.json"
    assert main(["retrieval", f"hf:{path}", "--lengths", "256", "--depths", "50", "--samples", "1",
                 "--pattern", "global=window:8", "--json", str(out), "--no-progress"]) == 0
    assert f"layout {layout}" in capsys.readouterr().out
    assert json.loads(out.read_text())["layout"] == layout


# -- what cannot run is refused by name ------------------------------------------------------------
@pytest.mark.parametrize("name, argv, message", [
    ("gemma2", ["--pattern", "chunked_attention=causal"], "unknown layer selector 'chunked_attention'; valid: "
                                                           "full_attention, global, local, sliding_attention"),
    ("gemma2", ["--pattern", "L4=causal"], "layer selector 'L4': the model has layers L0-3"),
    ("gemma2", ["--rope-scaling", "L0=yarn:4"], "shares one rotary embedding across its RoPE layers"),
    ("cohere2", ["--rope-scaling", "global=yarn:4"], "the layers global selects have no RoPE (RoPE is on layers "
                                                      "L0, L1, L2)"),
    ("gemma3_text", ["--rope-scaling", "L0=linear:2"], "keeps one RoPE per layer type"),
    ("opt", [], "model type 'opt' is not supported"),
])
def test_what_a_hybrid_cannot_honour_is_one_error_line(tf, configs, built, tmp_path, capsys, name, argv, message):
    from cli_checks import one_error_line
    from lexkit.cli import main

    if name == "opt":
        tf.OPTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, ffn_dim=32).save_pretrained(tmp_path)
        path = tmp_path
    elif name == "gemma2":
        path = built(name)
    else:  # only the config: loading reads it, and refuses, before the weights
        configs[name].save_pretrained(tmp_path)
        path = tmp_path
    data = tmp_path / "doc.txt"
    data.write_bytes(CORPUS)
    assert main(["eval", f"hf:{path}", "--lengths", "16", "--data", str(data), *argv]) == 2
    line = one_error_line(capsys)
    assert message in line, line


def test_rope_scaling_reaches_the_layers_that_rotate(tf):
    """Unqualified: every RoPE layer (NoPE layers have none to scale); a selector: the layers it names,
    per layer type where the model keeps one RoPE per type (Gemma 3), all or none where one rotary
    embedding serves every RoPE layer (Llama 4, Cohere 2)."""
    from lexkit.model.hf import MODEL_TYPES, parse_rope_scalings
    from lexkit.model.hf.loading import apply_rope_scaling

    assert parse_rope_scalings("full_attention=linear:8;local=yarn:2") == [
        ("full_attention", {"rope_type": "linear", "factor": 8}), ("local", {"rope_type": "yarn", "factor": 2})]
    configs = hybrid_configs(tf)
    gemma3 = configs["gemma3_text"]
    apply_rope_scaling(gemma3, parse_rope_scalings("global=linear:8"), MODEL_TYPES["gemma3_text"])
    assert gemma3.rope_parameters == {"full_attention": {"rope_type": "linear", "rope_theta": 1e6, "factor": 8},
                                      "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    llama4 = configs["llama4_text"]
    apply_rope_scaling(llama4, parse_rope_scalings("local=yarn:4"), MODEL_TYPES["llama4_text"])
    assert llama4.rope_parameters == {"rope_type": "yarn", "rope_theta": 5e5, "factor": 4}
    with pytest.raises(ValueError, match="the layers global selects have no RoPE"):
        apply_rope_scaling(llama4, parse_rope_scalings("global=yarn:4"), MODEL_TYPES["llama4_text"])


# -- the other families end to end (slow) ------------------------------------------------------------------
def _no_sinks(tf, path):
    model = eager(tf, path)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.fill_(-math.inf)
    return model


DROPPED = {  # transformers without the family's own rule: lexkit must not run this
    "gemma3_text": lambda tf, path: eager(tf, path, rope_parameters={
        t: {"rope_type": "default", "rope_theta": 10000.0} for t in (FULL, SLIDING)}),
    "gpt_oss": _no_sinks,
    "llama4_text": lambda tf, path: eager(tf, path, attn_temperature_tuning=False),
    "cohere2": lambda tf, path: eager(tf, path, layer_types=[FULL] * 4),
    "smollm3": lambda tf, path: eager(tf, path, no_rope_layers=[1] * 4),
    "qwen3": lambda tf, path: eager(tf, path, layer_types=[FULL] * 4),
}


@pytest.mark.slow  # fast siblings: test_gemma2_reproduces_transformers_eager, test_every_layer_is_read_from_the_config
@pytest.mark.parametrize("name", list(DROPPED))
def test_each_hybrid_reproduces_transformers_eager(tf, built, monkeypatch, name):
    check_parity(tf, built(name), monkeypatch, lambda path: DROPPED[name](tf, path))


@pytest.mark.slow  # fast siblings: test_causal_reproduces_transformers_eager (test_hf.py), test_every_layer_is_read...
@pytest.mark.parametrize("name", list(OTHERS))
def test_other_model_types_reproduce_transformers_eager(tf, built, monkeypatch, name):
    check_parity(tf, built(name), monkeypatch)


@pytest.mark.slow  # fast sibling: test_rope_scaling_reaches_the_layers_that_rotate
def test_gemma3_scales_the_rope_of_one_layer_type(tf, built):
    from lexkit.model import hf

    path = built("gemma3_text")
    params = {FULL: {"rope_type": "linear", "rope_theta": 1e6, "factor": 8.0},
              SLIDING: {"rope_type": "default", "rope_theta": 1e4}}
    x = ids(40)
    with torch.no_grad():
        theirs = eager(tf, path, rope_parameters=params)(x).logits
        ours = hf.load(path, rope_scaling="global=linear:8")(x)
        assert (theirs - eager(tf, path)(x).logits).abs().max() > 1e-3
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)


@pytest.mark.slow  # fast sibling: test_what_a_hybrid_cannot_honour_is_one_error_line
def test_sinks_refuse_flex_and_the_temperature_refuses_an_offset(tf, built):
    from lexkit.model import hf

    with pytest.raises(ValueError, match="has sink on its layers: kernel 'flex' cannot run a learned sink logit"):
        hf.load(built("gpt_oss"))(ids(8), kernel="flex")
    llama4 = hf.load(built("llama4_text"))
    with pytest.raises(ValueError, match="query temperature from the index in the input"):
        llama4(ids(8), offset=4)
    assert llama4.cfg.train_len == TRAIN and llama4.selector_names[3] == (FULL, "global")
