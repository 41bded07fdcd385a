"""The layer stack (built once, read everywhere), the modifier registry (a new modifier is one class)
and the mask algebra's OR (sinks are ``Either(First(K), Window(W))``)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from kit import tiny_gpt
from lexkit import attention, layouts
from lexkit.attention import Either, First, Pattern, kernels
from lexkit.attention import modifiers as mods
from lexkit.attention.patterns import Chunk, Window
from lexkit.core.specs import Param
from lexkit.model import gpt as model_module
from lexkit.model.gpt import GPT, ModelConfig
from oracle import reference_attention


def tiny(layout=None, **kw) -> GPT:
    return tiny_gpt(layout=layout, **kw)


# -- the stack: parsed once ------------------------------------------------------------------------
@pytest.fixture
def parses(monkeypatch):
    """Counts layout parses and pattern resolutions (the stack memo cleared, so a parse is a parse)."""
    counts = {"parse": 0, "resolve": 0}
    parse, resolve = layouts.parse, layouts.stack.resolve_pattern

    def counted_parse(*a, **kw):
        counts["parse"] += 1
        return parse(*a, **kw)

    def counted_resolve(*a, **kw):
        counts["resolve"] += 1
        return resolve(*a, **kw)

    monkeypatch.setattr(layouts, "parse", counted_parse)
    monkeypatch.setattr(layouts.stack, "resolve_pattern", counted_resolve)
    monkeypatch.setattr(model_module, "_STACKS", type(model_module._STACKS)())
    return counts


def test_a_forward_parses_no_layout_and_resolves_a_pattern_once(parses):
    model = tiny("hwfa:W=4")
    assert parses["parse"] == 1  # the config, once
    x = torch.randint(0, 256, (1, 20))
    with torch.no_grad():
        for _ in range(3):
            model(x)
            model(x, pattern="global=window:8")
        cache = model.new_cache()
        for i in range(0, 20, 5):
            model(x[:, i:i + 5], cache=cache)
    assert parses == {"parse": 1, "resolve": 2}  # causal and global=window:8, each once; no parse per forward


def test_a_run_loads_with_one_layout_parse(parses, tmp_path):
    from lexkit.training.runs.config import load as load_run
    from lexkit.training.runs.weights import save_weights

    model = tiny("hwfa:W=4")
    cfg = model.cfg
    run = tmp_path / "run"
    run.mkdir()
    config = {"version": 1, "model": dataclasses.asdict(cfg), "resolved": cfg.resolved(),
              "train": {"steps": 1, "data": "x"}, "data": {"spec": "x", "fingerprint": "0"}}
    (run / "config.json").write_text(json.dumps(config))
    save_weights(run, model)
    model_module._STACKS.clear()
    parses["parse"] = 0
    loaded, _ = load_run(run)
    assert parses["parse"] == 1 and loaded.stack == model.stack


def test_configs_of_one_layout_share_one_immutable_stack():
    a = ModelConfig(layout="hwfa:W=4", n_layers=2, d_model=32, n_heads=2, train_len=16)
    b = ModelConfig(layout="hwfa:W=4", n_layers=2, d_model=32, n_heads=2, train_len=16)
    c = ModelConfig(layout="hwfa:W=4", n_layers=2, d_model=32, n_heads=2, train_len=32)
    assert a.stack is b.stack and c.stack != a.stack
    assert [layer.pattern for layer in a.stack] == [Window(W=4), attention.create("causal")]
    with pytest.raises(AttributeError):
        a.stack.layers[0].scheme = "alibi"  # frozen


def test_the_stack_holds_objects_and_writes_itself_back():
    stack = layouts.parse("gpt-oss:W=8", n_layers=2, train_len=64)
    first = stack[0]
    assert isinstance(first.pattern, Pattern) and [type(m) for m in first.modifiers] == [mods.Sink]
    assert stack.canonical() == "rope@window:8+sink;rope@causal+sink"
    again = layouts.parse(stack.canonical(), n_layers=2, train_len=64)
    assert again == stack and again.resolved() == stack.resolved()


def test_a_hugging_face_layer_text_parses_back():
    """HF layers are a stack's layers: ``+softcap:C`` (Gemma 2) is a registered modifier, so the layout a
    Gemma model prints is a layout lexkit parses."""
    stack = layouts.parse("rope@window:8+softcap:50;rope@causal+softcap:50", n_layers=2, train_len=64)
    assert stack.canonical() == "rope@window:8+softcap:50;rope@causal+softcap:50"
    assert stack[0].find("softcap").values["C"] == 50.0


# -- a new modifier is one class ------------------------------------------------------------------
class ConstantScale(mods.Modifier):
    """A constant factor c on every score: the change test of the modifier registry (this class and
    its registration are all it takes)."""

    name = "constscale"
    params = {"c": Param(float, 2.0, "the factor", lambda x: x > 0, "> 0")}
    positional = "c"
    place = "scores"
    summary = "c times every score"
    source = "a test"

    def query_scale(self, state, pos):
        return torch.full((pos.shape[0],), self.values["c"])


@pytest.fixture
def constant_scale():
    mods.register(ConstantScale)
    yield ConstantScale
    mods.MODIFIERS._classes.pop(ConstantScale.name)


@pytest.mark.parametrize("kernel", ["dense", "chunked"])
def test_a_modifier_registered_in_one_class_runs_in_the_grammar_the_model_the_kernels_and_the_cache(
        constant_scale, kernel, capsys):
    """c on every score equals the same weights with the query projection times c (RoPE is linear in
    q), on every kernel and through the KV cache; `lexkit layouts` lists it. Nothing else changed."""
    from lexkit.cli import main

    scaled = tiny("rope@causal+constscale:3;rope@causal+constscale:3")
    plain = tiny("rope@causal;rope@causal")
    plain.load_state_dict(scaled.state_dict())
    with torch.no_grad():
        for block in plain.blocks:
            block.qkv.weight[:32] *= 3  # q rows
        x = torch.randint(0, 256, (1, 24))
        want = plain(x, kernel=kernel)
        assert (scaled(x, kernel=kernel) - want).abs().max() <= 1e-5
        cache = scaled.new_cache()
        pieces = torch.cat([scaled(x[:, i:i + 6], cache=cache) for i in range(0, 24, 6)], 1)
        assert (pieces - want).abs().max() <= 1e-5
    assert main(["layouts"]) == 0
    assert "constscale" in capsys.readouterr().out


def test_a_modifier_that_grows_with_the_position_is_refused_on_a_local_layer():
    with pytest.raises(ValueError, match="layer 0.*logn.*global layer"):
        layouts.parse("rope@window:4+logn;none", n_layers=2, train_len=16)


# -- the mask algebra's OR ------------------------------------------------------------------------
def grid(n: int = 40):
    return torch.arange(n)[:, None], torch.arange(n)[None, :]


def test_sinks_are_either_the_first_keys_or_a_window():
    q, k = grid()
    for w, kk in [(4, 2), (8, 4), (1, 1)]:
        sinks = attention.create(f"sinks:{w},K={kk}")
        union = Either(First(kk), Window(W=w))
        assert isinstance(sinks, Either) and torch.equal(sinks.visible(q, k), union.visible(q, k))
        want = (k <= q) & ((q - k < w) | (k < kk))
        assert torch.equal(sinks.visible(q, k), want)
        assert (sinks.reach, sinks.sinks) == (union.reach, union.sinks) == (w, kk)
        for at in (0, 5, 17):
            assert torch.equal(sinks.retained(k[0], at), union.retained(k[0], at))


def test_either_derives_its_reach_sinks_and_retained_keys_from_its_parts():
    q, k = grid()
    either = Either(Window(W=3), Chunk(W=8))
    assert torch.equal(either.visible(q, k), Window(W=3).visible(q, k) | Chunk(W=8).visible(q, k))
    assert either.reach == 8 and either.sinks == 0 and either.spec == "window:3|chunk:8"
    visible = either.visible(q, k)
    assert bool(((q - k)[visible] < either.reach).all())  # the reach bounds every visible pair
    for at in range(0, 40, 7):  # a key some query at index >= at sees is retained
        later = visible[at:].any(0)
        assert bool((either.retained(k[0], at) | ~later).all())
    assert Either(Window(W=3), attention.create("causal")).reach is None


@pytest.mark.parametrize("pattern", [Either(First(2), Chunk(W=8)), Either(Window(W=3), Chunk(W=8))])
def test_a_composed_pattern_runs_the_kernels_the_block_mask_and_the_cache_alike(pattern):
    """The chunked kernel and the dense one agree with the reference under an OR of patterns; the
    block mask lists exactly the tiles the predicate shows; streaming equals one pass."""
    from lexkit import positions

    torch.manual_seed(1)
    scheme = positions.create("rope", n_heads=2, head_dim=8)
    n = 300
    pos = torch.arange(n)
    q, kk, v = (torch.randn(1, 2, n, 8) for _ in range(3))
    with torch.no_grad():
        want = reference_attention(q, kk, v, scheme, pattern, pos)
        for kernel in ("dense", "chunked"):
            assert (attention.Attention(scheme, pattern, pos, kernel=kernel)(q, kk, v) - want).abs().max() <= 1e-5
    mask = kernels.build_block_mask(pattern, n, torch.device("cpu"))
    tile = kernels.FLEX_BLOCK
    for i in range(mask.kv_num_blocks.shape[-1]):
        rows = torch.arange(i * tile, min((i + 1) * tile, n))
        seen = {int(j) // tile for j in torch.arange(n)[pattern.visible(rows[:, None], torch.arange(n)[None]).any(0)]}
        listed = set(mask.kv_indices[0, 0, i, : int(mask.kv_num_blocks[0, 0, i])].tolist())
        full = (set(mask.full_kv_indices[0, 0, i, : int(mask.full_kv_num_blocks[0, 0, i])].tolist())
                if mask.full_kv_num_blocks is not None else set())
        assert seen == listed | full
    model = tiny()
    x = torch.randint(0, 256, (1, 45))
    with torch.no_grad():
        one = model(x, pattern=pattern)
        cache = model.new_cache(pattern)
        pieces = torch.cat([model(x[:, i:i + 9], pattern=pattern, cache=cache) for i in range(0, 45, 9)], 1)
    assert (one - pieces).abs().max() <= 1e-5
