"""lexkit.layouts and the layered model: the grammar and the named designs, a uniform layout equal to
today's model bit for bit, what an evaluation pattern means per layer, a hand-built local/global
induction model that copies at 16x (and cannot past its receptive field when its global layer runs
under a window), per-layer caches, streamed == one pass for every named layout, and bad input."""

from __future__ import annotations

import csv
import json
import random

import pytest
import torch
import torch.nn.functional as F

from cli_checks import one_error_line, train_refused
from induction import induction_model
from kit import nudge, tiny_gpt
from lexkit import GPT, ModelConfig, layouts
from lexkit.attention import Layered
from lexkit.cli import main
from lexkit.data.corpus import encode
from lexkit.evaluate import stream_nll
from toy_corpus import TINY, write_corpus


def parse(text: str, n_layers: int = 2, train_len: int = 64) -> str:
    return layouts.canonical(layouts.parse(text, n_layers=n_layers, train_len=train_len))


def small(layout: str | None = None, n_layers: int = 2, **kw) -> GPT:
    """The kit's model, its learned sinks and temperatures away from their init."""
    model = tiny_gpt(layout=layout, n_layers=n_layers, **kw)
    return nudge(model, lambda name: name.endswith(".sink") or name.endswith(".temperature.s"), 0.5)


# -- the grammar --------------------------------------------------------------------------------
@pytest.mark.parametrize("text, n_layers, want", [
    ("rope@window:16 ; none@causal+logn", 2, "rope@window:16;none@causal+logn:L=64"),  # L: the training length
    ("rope@window:16 ; none@causal + logn + sink", 2, "rope@window:16;none@causal+logn:L=64+sink"),  # spaces at '+'
    ("none+sink+logn:L=32", 1, "none@causal+logn:L=32+sink"),  # modifiers in canonical order
    ("(rope@window:64)x3 ; none", 4, "(rope@window:64)x3;none@causal"),
    ("rope@window:8;none", 4, "rope@window:8;none@causal;rope@window:8;none@causal"),  # 2 layers repeat to fit 4
    ("@bca", 2, "(rope@bca:64)x2"),  # the model's scheme; W = the training length
    ("rerope@causal", 1, "rerope:w=64@causal"),  # a length default written out
    ("none+llama4:beta=0.2+sink", 1, "none@causal+llama4:beta=0.2,floor=64+sink"),
    ("rope@window:8+shift:0.25;none+logn+shift", 2, "rope@window:8+shift:0.25;none@causal+logn:L=64+shift"),
    ("((rope@chunk:8)x2;none@causal+ssmax)x2", 6,
     "(rope@chunk:8)x2;none@causal+ssmax;(rope@chunk:8)x2;none@causal+ssmax"),
])
def test_written_layouts_parse_to_their_canonical_form(text, n_layers, want):
    assert parse(text, n_layers) == want
    assert parse(want, n_layers) == want  # canonical is a fixed point


@pytest.mark.parametrize("text, n_layers, train_len, want", [
    ("hwfa", 2, 64, "rope@window:48;none@causal+logn:L=64"),  # Su's rule: (W-1)(L-1)+1 = 3/4 N -> 48
    ("hwfa", 4, 128, "(rope@window:33)x3;none@causal+logn:L=128"),  # (W-1)*3 + 1 = 96 -> W = 32.67 -> 33
    ("hwfa:W=16,logn=false", 2, 64, "rope@window:16;none@causal"),
    ("hwfa2:W=16", 2, 64, "rope@window:16;rope@causal+logn:L=64"),
    ("rnope-swa", 4, 64, "(rope@window:16)x3;none@causal"),
    ("irope", 4, 64, "(rope@chunk:16)x3;none@causal+llama4:floor=16"),
    ("irope:chunk=8,local=bca,every=2", 4, 64,
     "rope@bca:8;none@causal+llama4:floor=8;rope@bca:8;none@causal+llama4:floor=8"),
    ("gemma", 6, 64, "(rope@window:16)x5;rope:base=1000000.0@causal"),
    ("gemma:ratio=1,W=32", 2, 64, "rope@window:32;rope:base=1000000.0@causal"),
    ("gpt-oss:W=8", 2, 64, "rope@window:8+sink;rope@causal+sink"),
    ("hwfa:W=16,shift=0.5", 2, 64, "rope@window:16+shift;none@causal+logn:L=64+shift"),
])
def test_named_layouts_are_their_designs(text, n_layers, train_len, want):
    assert parse(text, n_layers, train_len) == want


def test_the_hwfa_window_follows_su_s_receptive_field_rule():
    for n_layers, n in [(2, 64), (4, 128), (12, 512), (3, 33)]:
        w = layouts.hwfa_window(n_layers, n)
        assert abs((w - 1) * (n_layers - 1) + 1 - 0.75 * n) <= (n_layers - 1) / 2 + 1e-9  # nearest to 3N/4


@pytest.mark.parametrize("text, n_layers, words", [
    ("ropee@window:4;none", 2, ["layer 0", "unknown position scheme 'ropee'"]),
    ("rope@windo:4;none", 2, ["layer 0", "unknown attention pattern 'windo'"]),
    ("rope@window:4;none+tempo", 2, ["layer 1", "unknown layer modifier 'tempo'"]),
    ("rope;none;rope", 2, ["3 layers and the model 2"]),
    ("rope@window:16+logn;none", 2, ["layer 0", "logn", "global layer"]),
    ("sinusoidal;none", 2, ["layer 0", "absolute scheme must be every layer's"]),
    ("rope+logn+ssmax", 1, ["two temperatures"]),
    ("(rope;none", 2, ["'(' without its ')'"]),
    ("rope@", 1, ["no pattern after it"]),
    ("irope", 2, ["every 4", "at least 4 layers"]),
    ("hwfa", 1, ["at least 2 layers"]),
    ("hwfa:X=3", 2, ["unknown parameter 'X'"]),
    ("foo", 2, ["unknown layout 'foo'", "hwfa"]),
    ("rope;;none", 2, ["empty layer"]),
    ("rope+shift:1.5", 1, ["shift", "F=1.5", "in (0, 1)"]),
    ("rope+softcap", 1, ["softcap needs its cap C"]),
    ("rope+logn:L=1", 1, ["L=1", ">= 2"]),
    ("rope+shift+shift", 1, ["'+shift' given twice"]),
])
def test_bad_layouts_name_the_layer_and_the_fault(text, n_layers, words):
    with pytest.raises(ValueError) as info:
        layouts.parse(text, n_layers=n_layers, train_len=64)
    assert all(w in str(info.value) for w in words), str(info.value)


# -- a uniform layout is today's model ----------------------------------------------------------
@pytest.mark.parametrize("layout, scheme, logn", [("(kerple-log@causal)x2", "kerple-log", False),
                                                  ("rope+logn", "rope", True), ("t5;t5", "t5", False)])
def test_a_layout_of_identical_layers_is_todays_model_bit_for_bit(layout, scheme, logn):
    from lexkit.resolution import empirical

    old, new = small(scheme=scheme, logn=logn), small(layout)
    assert list(old.state_dict()) == list(new.state_dict())
    new.load_state_dict(old.state_dict())
    x = torch.randint(0, 256, (2, 24))  # past the training length of 16 (log-n's and the window's W)
    for model in (old, new):
        model.train()
        F.cross_entropy(model(x).flatten(0, 1), x.flatten()).backward()
    for (name, a), b in zip(old.named_parameters(), new.parameters()):
        assert torch.equal(a.grad, b.grad), name
    old.eval(), new.eval()
    with torch.no_grad():
        for pattern in ("causal", "window", "bca:8"):
            assert torch.equal(old(x, pattern=pattern), new(x, pattern=pattern)), pattern
            caches = old.new_cache(pattern), new.new_cache(pattern)
            for i in range(0, 24, 7):
                assert torch.equal(old(x[:, i:i + 7], pattern=pattern, cache=caches[0]),
                                   new(x[:, i:i + 7], pattern=pattern, cache=caches[1]))
        r_old, r_new = empirical(old, x, "window"), empirical(new, x, "window")
        assert r_old["per_head"] == r_new["per_head"] and r_old["entropy_per_head"] == r_new["entropy_per_head"]


# -- what an evaluation pattern means on a layered model ----------------------------------------
def test_an_evaluation_pattern_applies_inside_each_layers_own_and_a_selector_replaces():
    model = small("rope@window:4;none@causal+logn")
    specs = lambda p: [q.spec for q in p.layers] if isinstance(p, Layered) else [p.spec] * 2  # noqa: E731
    assert specs(model.pattern("causal")) == ["window:4", "causal"]  # the run's own layout
    assert specs(model.pattern("window:8")) == ["window:4", "window:8"]  # the narrower of the two
    assert specs(model.pattern("window:2")) == ["window:2", "window:2"]
    assert specs(model.pattern("bca:8")) == ["window:4&bca:8", "bca:8"]
    assert specs(model.pattern("global=window:8")) == ["window:4", "window:8"]
    assert specs(model.pattern("local=causal")) == ["causal", "causal"]
    assert specs(model.pattern("L0=bca:6;L1=chunk:5")) == ["bca:6", "chunk:5"]
    assert specs(model.pattern("window:8;L0=causal")) == ["causal", "window:8"]
    assert model.pattern("global=window:8").spec == "global=window:8"
    assert model.pattern("causal").reach is None and model.pattern("window:8").reach == 8
    uniform = small(scheme="rope")
    assert uniform.pattern("window:8").spec == "window:8" and not isinstance(uniform.pattern("window:8"), Layered)
    for bad, words in [("middle=causal", "unknown layer selector 'middle'"), ("L2=causal", "layers L0-1"),
                       ("window:4;window:8", "two patterns for every layer"), ("global=", "nothing after '='")]:
        with pytest.raises(ValueError, match=words):
            model.pattern(bad)
    with pytest.raises(ValueError, match="has no local layer"):
        uniform.pattern("local=window:8")


def test_an_override_changes_exactly_the_layers_it_names():
    model = small("rope@window:4;none@causal;rope@window:4;none@causal", n_layers=4)
    x = torch.randint(0, 256, (1, 48))

    def probs(pattern):
        seen = {}
        model(x, pattern=pattern, kernel="chunked",
              hook=lambda layer, q, k, s, p: seen.setdefault(layer, []).append(p.clone()))
        return {layer: torch.cat(ps, dim=-2) for layer, ps in seen.items()}

    with torch.no_grad():
        own, changed = probs("causal"), probs("L3=window:6")
    assert all(torch.equal(own[i], changed[i]) for i in range(3))  # layers 0-2 see exactly what they saw
    assert not torch.equal(own[3], changed[3])


# -- the local/global induction circuit --------------------------------------------------------------
def copy_doc(rng: random.Random, length: int, depth: float) -> tuple[bytes, int]:
    """~ + 12 distinct letters, filler of digits and punctuation, ~ + the letters again: the text and
    where the second copy's letters start."""
    key = bytes(rng.sample(b"abcdefghijklmnop", 12))
    filler = bytes(rng.choice(b"0123456789 .\n") for _ in range(length - 2 * (len(key) + 1)))
    cut = round(len(filler) * depth)
    text = filler[:cut] + b"~" + key + filler[cut:] + b"~" + key
    return text, len(text) - len(key)


@torch.no_grad()
def test_a_window_layer_under_a_global_nope_layer_copies_at_16x_at_every_depth():
    """The hand-built induction model (tests/fixtures/induction.py: RoPE under window:2, then NoPE
    under causal, trained length 64) copies 12 letters exactly at 64 to 1024 bytes and every depth."""
    model = induction_model()
    rng = random.Random(0)
    for length in (64, 128, 256, 1024):
        for depth in (0.0, 0.25, 0.5, 0.75, 1.0):
            text, start = copy_doc(rng, length, depth)
            tokens = encode(text)[None]
            predicted = model(tokens[:, :-1])[0, start:].argmax(-1)
            assert torch.equal(predicted, tokens[0, start + 1:]), (length, depth)


@torch.no_grad()
def test_with_its_global_layer_under_a_window_it_cannot_copy_past_its_receptive_field():
    """Under global=window:W the answer's logits do not depend on anything more than W tokens back
    (layer 0 reaches 1 back, layer 1 W - 1): a needle farther away changes nothing, exactly, and the
    copy fails; a needle within reach is still copied."""
    model = induction_model()
    w = 64
    rng = random.Random(1)
    text, start = copy_doc(rng, 1024, 0.0)  # the needle ~1000 bytes back
    tokens = encode(text)[None]
    hidden = bytearray(text)
    hidden[1:13] = b"............"  # the needle's letters replaced by filler
    without = encode(bytes(hidden))[None]
    far = model(tokens[:, :-1], pattern=f"global=window:{w}")[0, start:]
    assert torch.equal(far, model(without[:, :-1], pattern=f"global=window:{w}")[0, start:])
    assert not torch.equal(far.argmax(-1), tokens[0, start + 1:])
    near_text, near_start = copy_doc(rng, 1024, 1.0)  # the needle right before the question
    near = encode(near_text)[None]
    assert torch.equal(model(near[:, :-1], pattern=f"global=window:{w}")[0, near_start:].argmax(-1),
                       near[0, near_start + 1:])


# -- per-layer caches and streaming ---------------------------------------------------------------
def test_a_hybrids_cache_keeps_w_keys_on_local_layers_and_every_key_on_global_ones():
    model = small("rope@window:6;none@causal;rope@chunk:5;alibi@bca:8", n_layers=4)
    cache = model.new_cache("causal")
    fed = 0
    with torch.inference_mode():
        for piece in [1, 4, 9, 1, 13, 2]:
            model(torch.randint(0, 256, (1, piece)), cache=cache)
            fed += piece
            assert cache.kept(0) == min(fed, 5)  # window:6 keeps the last W - 1 keys
            assert cache.kept(1) == fed  # global: every key
            assert cache.kept(2) == fed % 5  # chunk:5 keeps the current chunk's keys
            assert cache.kept(3) == fed - max(0, (fed // 4 - 1) * 4)  # bca:8: the previous block of 4 and this one
            assert [cache.keys[i].live().shape[-2] for i in range(4)] == [cache.kept(i) for i in range(4)]


NAMED_MODELS = [("hwfa:W=4", 2), ("hwfa2:W=4", 2), ("rnope-swa:W=5", 4), ("irope:chunk=6", 4),
                ("irope:chunk=6,local=bca", 4), ("gemma:W=5,ratio=2", 3), ("gpt-oss:W=5", 2)]


@pytest.mark.parametrize("layout, n_layers", NAMED_MODELS)
def test_streamed_equals_one_pass_for_every_named_layout(layout, n_layers):
    """40 tokens in segments of 13 (the last of one token), every window and chunk across a segment's edge."""
    model = small(layout, n_layers=n_layers, token_shift=0.25)
    x = torch.randint(0, 256, (2, 40))
    y = torch.randint(0, 256, (2, 40))
    with torch.inference_mode():
        for spec in ("causal", "window:12", "global=window:9"):
            pat = model.pattern(spec)
            logits = model(x, pattern=pat, offset=300, kernel="dense")
            ref = F.cross_entropy(logits.double().flatten(0, 1), y.flatten(), reduction="none").view(y.shape)
            got = stream_nll(model, x, y, pat, segment=13, offset=300)
            assert (got - ref).abs().max() <= 1e-5, (layout, spec)


def test_every_named_layout_is_covered_by_the_streaming_test():
    assert {name.split(":")[0] for name, _ in NAMED_MODELS} == set(layouts.NAMED.names())


# -- token shift ----------------------------------------------------------------------------------
def test_token_shift_moves_the_last_features_one_position_as_x_transformers_shift_tokens():
    from lexkit.attention.modifiers import token_shift

    h = torch.arange(2 * 4 * 6, dtype=torch.float32).view(2, 4, 6)
    got = token_shift(h, 3)
    want = h.clone()
    want[:, 1:, 3:] = h[:, :-1, 3:]  # x-transformers ShiftTokens((0, 1)): the second half shifted by one
    want[:, 0, 3:] = 0
    assert torch.equal(got, want)
    assert torch.equal(token_shift(h, 3, previous=torch.ones(2, 1, 3))[:, 0, 3:], torch.ones(2, 3))
    with pytest.raises(ValueError, match="token_shift"):
        ModelConfig(token_shift=1.0)


def test_a_layout_shifts_the_layers_it_names():
    model = small("rope@window:4+shift:0.25;none@causal")
    assert [[m.spec for m in block.layer.at("inputs")] for block in model.blocks] == [["shift:0.25"], []]
    x = torch.randint(0, 256, (1, 30))
    with torch.no_grad():
        cache = model.new_cache()
        pieces = torch.cat([model(x[:, i:i + 7], cache=cache) for i in range(0, 30, 7)], dim=1)
        assert (model(x) - pieces).abs().max() <= 1e-5


@pytest.mark.parametrize("layout, token_shift, shifts", [
    ("rope@window:4+shift:0.25;none@causal", 0.0, True), ("hwfa:W=16,shift=0.5", 0.0, True),
    ("hwfa:W=16", 0.0, False), ("rope@window:16;none@causal+kshift", 0.0, False),  # kshift shifts keys, not tokens
    ("hwfa:W=16", 0.5, True), (None, 0.25, True), (None, 0.0, False)])
def test_the_stack_says_whether_it_shifts_tokens(layout, token_shift, shifts):
    """One answer, read by the model config (a --token-shift on top of a layout's own is refused), table
    G's recipe (no recipe shift on a layout that shifts) and a run rebuilt from its recorded layers."""
    cfg = ModelConfig(n_layers=2, d_model=32, n_heads=2, train_len=32, layout=layout, token_shift=token_shift)
    assert cfg.stack.shifts_tokens is shifts
    if layout is not None and cfg.stack.shifts_tokens and not token_shift:
        with pytest.raises(ValueError, match="the layout shifts some itself"):
            ModelConfig(n_layers=2, d_model=32, n_heads=2, train_len=32, layout=layout, token_shift=0.5)


def test_token_shift_reaches_every_block_and_the_cache_carries_it():
    model = small(scheme="alibi", token_shift=0.5)
    assert all([m.spec for m in block.layer.at("inputs")] == ["shift"] for block in model.blocks)
    x = torch.randint(0, 256, (1, 30))
    with torch.no_grad():
        one = model(x)
        cache = model.new_cache()
        pieces = torch.cat([model(x[:, i:i + 4], cache=cache) for i in range(0, 30, 4)], dim=1)
        assert (one - pieces).abs().max() <= 1e-5
        x2 = x.clone()
        x2[0, 10] = (x2[0, 10] + 1) % 256
        assert torch.equal(model(x2)[:, :10], one[:, :10])  # still causal


# -- training, runs and the command line ----------------------------------------------------------
def test_train_with_a_layout_records_it_and_every_command_takes_the_run(tmp_path, capsys):
    data = write_corpus(tmp_path / "data")
    out = tmp_path / "hwfa"
    # 2 of TINY's 12 steps (saved and evaluated at the last): the run's records are checked, not how far it trained
    argv = ["train", "--layout", "hwfa:W=8", "--token-shift", "0.25", "--out", str(out), "--data", str(data), *TINY,
            "--steps", "2"]
    assert main(argv) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["model"]["layout"] == "hwfa:W=8" and config["model"]["token_shift"] == 0.25
    capsys.readouterr()
    assert main(["runs", str(tmp_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.endswith(str(out)))
    assert row.split()[:2] == ["-", "hwfa:W=8"]
    assert main(["eval", str(out), "--lengths", "64", "--pattern", "causal", "--pattern", "global=window:16",
                 "--json", str(tmp_path / "e.json"), "--csv", str(tmp_path / "e.csv")]) == 0
    report = json.loads((tmp_path / "e.json").read_text())
    assert [r["pattern"] for r in report["results"]] == ["causal", "global=window:16"]
    ran = "rope@window:8+shift:0.25;none@causal+logn:L=32+shift:0.25"  # as it ran (tiny: 32 bytes)
    assert report["layout"] == ran and report["label"] == "hwfa:W=8" and "scheme" not in report  # never a scheme
    assert "layout hwfa:W=8" in capsys.readouterr().out
    rows = list(csv.DictReader((tmp_path / "e.csv").open()))  # the CSV names the layout as the JSON does
    assert [(r["label"], r["scheme"], r["layout"]) for r in rows] == [("hwfa:W=8", "", ran)] * 2
    for argv, path, line in (
            (["retrieval", str(out), "--lengths", "64", "--samples", "1", "--depths", "0"], "g.json",
             "layout hwfa:W=8"),
            (["resolution", str(out), "--lengths", "32", "--texts", "1"], "s.json", "(hwfa:W=8, trained at 32)"),
            (["inspect", str(out), "--data", str(data)], "i.json", "layout hwfa:W=8")):
        assert main([*argv, "--json", str(tmp_path / path)]) == 0
        doc = json.loads((tmp_path / path).read_text())
        assert doc["report_version"] == 3 and doc["label"] == "hwfa:W=8" and "scheme" not in doc, (argv[0], doc)
        assert line in capsys.readouterr().out, argv[0]
    assert main(["eval", str(out), "--lengths", "64", "--scheme", "global=rerope:w=16", "--json",
                 str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["layout"] == "rope@window:8+shift:0.25;rerope:w=16@causal+logn:L=32+shift:0.25"
    assert report["trained_layout"] == "hwfa:W=8"
    capsys.readouterr()
    assert main(["train", "--layout", "rope@window:8;none@causal", "--resume", "--out", str(out),
                 "--data", str(data), *TINY]) == 2
    assert "model.layout" in one_error_line(capsys)


@pytest.mark.parametrize("argv, words", [
    (["--layout", "rope@window:8;ropee"], ["layer 1", "ropee"]),
    (["--layout", "rope;none;rope"], ["3 layers and the model 2"]),
    (["--layout", "rope@window:8+logn;none"], ["layer 0", "global layer"]),
    (["--layout", "hwfa", "--logn"], ["--logn", "+logn"]),
    (["--layout", "hwfa", "--token-shift", "1.5"], ["token_shift"]),
    (["--layout", "hwfa:shift=0.5", "--token-shift", "0.5"], ["--token-shift", "+shift"]),
])
def test_bad_layouts_on_the_command_line_write_nothing(tmp_path, capsys, argv, words):
    line = train_refused(tmp_path, capsys, argv)
    assert all(w in line for w in words), line


def test_an_unqualified_scheme_reaches_the_layers_of_its_family():
    stack = layouts.parse("hwfa:W=8", n_layers=2, train_len=64)
    assert stack.replace_schemes("rope:scaling=yarn,factor=4").canonical() == \
        "rope:scaling=yarn,factor=4.0,original_len=64@window:8;none@causal+logn:L=64"
    assert stack.replace_schemes("L0-1=alibi").canonical() == "alibi@window:8;alibi@causal+logn:L=64"
    with pytest.raises(ValueError, match="no layer of this model has a bias scheme"):
        stack.replace_schemes("alibi")


def test_a_global_layer_over_many_keys_scores_fewer_queries_at_a_time(monkeypatch):
    from lexkit.attention import kernels

    rope = small(scheme="rope").scheme
    assert kernels.query_block(rope, keys=0) == kernels.step.CHUNK
    assert kernels.query_block(rope, keys=1_048_576, rows=4) == 16  # 16 x 2^20 x 4 scores, not 256 x
    monkeypatch.setattr(kernels.step, "SCORE_BUDGET", 1 << 10)  # every block of 16 queries: still exact
    model = small("hwfa:W=4")
    x, y = torch.randint(0, 256, (1, 90)), torch.randint(0, 256, (1, 90))
    with torch.inference_mode():
        logits = model(x, kernel="chunked")
        ref = F.cross_entropy(logits.double().flatten(0, 1), y.flatten(), reduction="none").view(y.shape)
        assert (stream_nll(model, x, y, model.pattern("causal"), segment=37) - ref).abs().max() <= 1e-5
        assert (model(x, kernel="dense") - logits).abs().max() <= 1e-5


def test_a_study_trains_a_layout_beside_its_schemes(tmp_path, no_figures):
    """`lexkit study --layout`: a row of the grid labelled with the layout as given, ``layered``, its
    analytic R before training the mean over its layers of each layer's own."""
    from lexkit.study.execution import layer_mean
    from lexkit.study.results import read

    data = write_corpus(tmp_path / "data")
    argv = ["study", "--preset", "tiny", "--scheme", "rope", "--layout", "hwfa:W=8,shift=0.5", "--lengths", "16,32",
            "--pattern", "causal", "--steps", "4", "--no-extension", "--no-retrieval", "--data", str(data),
            "--out", str(tmp_path / "s"), "--quiet"]
    assert main(argv) == 0
    results = read(json.loads((tmp_path / "s" / "results.json").read_text()))
    # a layout is layered, with no family where its layers' schemes differ (hwfa: rope local, none global)
    assert [(r.label, r.layered, r.family) for r in results.runs] == [("rope", False, "rotary"),
                                                                      ("hwfa:W=8,shift=0.5", True, None)]
    model = GPT(ModelConfig(layout="hwfa:W=8,shift=0.5", n_layers=2, d_model=32, n_heads=2, train_len=32))
    want = layer_mean(model, [32], "causal")[32]
    got = [r.resolution for r in results.analytic if r.label == "hwfa:W=8,shift=0.5" and r.length == 32]
    assert got == [pytest.approx(want)]
    from lexkit.study import StudyConfig

    with pytest.raises(ValueError, match="layout irope"):
        StudyConfig(preset="tiny", layouts=["irope"])  # irope needs 4 layers; tiny has 2


@pytest.mark.parametrize("text", ["none+kshift+", "none++gate", "rope@window:16+ ", "none + + gate"])
def test_an_empty_modifier_name_is_said_as_such(text):
    """A '+' with no name after it was reported as an unknown modifier 'kshift+' or scheme 'none+'."""
    from lexkit.layouts.layer import LayoutError, parse_layer

    with pytest.raises(LayoutError, match=r"^layer 0: an empty modifier name \(a '\+' with no name after it\)"):
        parse_layer(text, scheme="rope", train_len=16, where="layer 0")


@pytest.mark.parametrize("recorded, token_shift", [("(rope:base=500.0,scaling=none@causal+shift:F=0.5)x2", 0.0),
                                                   ("(rope:base=500.0,scaling=none@causal+kshift:v=true)x2", 0.5)])
def test_a_run_rebuilt_from_its_recorded_layers_keeps_one_token_shift(tmp_path, recorded, token_shift):
    """A run whose recorded layers today's defaults no longer give runs as recorded: its model-wide token
    shift dropped where the recorded layers shift tokens themselves (the stack's answer, not the text's:
    ``+kshift`` shifts keys)."""
    from lexkit.training.runs.config import as_recorded

    model = {"scheme": "rope", "n_layers": 2, "d_model": 32, "n_heads": 2, "train_len": 32, "token_shift": 0.5}
    with pytest.warns(Warning, match="runs as it trained"):
        settings = as_recorded({"model": model, "resolved": recorded}, tmp_path)
    assert settings == {"layout": recorded, "logn": False, "token_shift": token_shift}
    ModelConfig(**{**model, **settings})  # and it builds


def test_layouts_show_names_each_layers_scope(capsys):
    """`lexkit layouts --show`: a layer's local/global under the column of its name, scope (was kind)."""
    assert main(["layouts", "--show", "hwfa:W=16", "--layers", "2"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()[1:]
    assert header.split() == ["layer", "scope", "scheme", "pattern", "modifiers"]
    assert [row.split()[1] for row in rows] == ["local", "global"]
