"""Weight-tied depth: a loop ``(LAYERS)^N`` in a layout runs one body N times with the same weights
(lexkit.layouts.layer.expand_looped, LayerStack.weights, GPT.layer_blocks). The stack reads back from its
canonical text; the model holds each block once; its forward is the unrolled model's with the copies
set equal, and its gradient the sum of the copies' gradients; kernels and the KV cache agree; bad loops
are one line."""

from __future__ import annotations

import pytest
import torch

from kit import assert_kernels_and_cache_agree
from lexkit import GPT, ModelConfig, layouts
from lexkit.attention import kernels


@pytest.mark.parametrize("text, weights, canonical", [
    ("(rope@window:16;none@causal)^2", (0, 1, 0, 1), "(rope@window:16;none@causal)^2"),
    ("none;(rope@window:4)^3;none", (0, 1, 1, 1, 4), "none@causal;(rope@window:4)^3;none@causal"),
    ("((rope@window:4)x2;none)^2", (0, 1, 2, 0, 1, 2), "((rope@window:4)x2;none@causal)^2"),
    ("((none;rope)^2)^2", (0, 1) * 4, "(none@causal;rope@causal)^4"),
    ("(none;rope)x2", (0, 1, 2, 3), "none@causal;rope@causal;none@causal;rope@causal"),  # copies: their own
])
def test_a_loop_runs_its_first_passs_weights_and_reads_back_from_its_canonical_text(text, weights, canonical):
    stack = layouts.parse(text, n_layers=len(weights), train_len=16)
    assert stack.weights == weights and stack.canonical() == canonical
    again = layouts.parse(stack.canonical(), n_layers=len(weights), train_len=16)
    assert again == stack and again.weights == weights
    assert stack != layouts.parse(text.replace("^", "x"), n_layers=len(weights), train_len=16) or "^" not in text


def test_a_layout_repeated_to_fill_the_model_gives_each_repetition_its_own_weights():
    stack = layouts.parse("(none;rope)^2", n_layers=8, train_len=16)
    assert stack.weights == (0, 1, 0, 1, 4, 5, 4, 5)
    assert stack.canonical() == "(none@causal;rope@causal)^2;(none@causal;rope@causal)^2"


def pair(d: int = 32):
    torch.manual_seed(0)
    looped = GPT(ModelConfig(n_layers=4, d_model=d, n_heads=2, train_len=16,
                             layout="(rope@window:4+shift;none@causal+logn)^2"))
    unrolled = GPT(ModelConfig(n_layers=4, d_model=d, n_heads=2, train_len=16,
                               layout="(rope@window:4+shift;none@causal+logn)x2"))
    state = looped.state_dict()
    with torch.no_grad():  # the unrolled model's copies set to the looped model's one body
        for name, p in unrolled.named_parameters():
            parts = name.split(".")
            if parts[0] == "blocks":
                parts[1] = str(int(parts[1]) % 2)
            p.copy_(state[".".join(parts)])
    return looped, unrolled


def test_the_loop_is_the_unrolled_model_with_equal_copies_and_its_gradient_the_copies_sum():
    looped, unrolled = pair()
    assert len(looped.blocks) == 2 and looped.block_of == [0, 1, 0, 1]
    assert sum(p.numel() for p in looped.parameters()) < sum(p.numel() for p in unrolled.parameters())
    assert not any(k.startswith(("blocks.2.", "blocks.3.")) for k in looped.state_dict())
    x = torch.randint(0, 256, (2, 24), generator=torch.Generator().manual_seed(1))
    y = x.roll(-1, 1)
    losses = []
    for net in (looped, unrolled):
        loss = torch.nn.functional.cross_entropy(net(x).flatten(0, 1), y.flatten())
        loss.backward()
        losses.append(loss)
    torch.testing.assert_close(losses[0], losses[1], rtol=0, atol=1e-6)
    grads = dict(unrolled.named_parameters())
    for name, p in looped.named_parameters():
        if name.startswith("blocks."):
            i, rest = name.split(".", 2)[1:]
            want = grads[f"blocks.{i}.{rest}"].grad + grads[f"blocks.{int(i) + 2}.{rest}"].grad
            torch.testing.assert_close(p.grad, want, rtol=1e-5, atol=1e-7)


def test_dense_chunked_and_the_cache_agree_on_a_loop(monkeypatch):
    monkeypatch.setattr(kernels.step, "CHUNK", 8)
    looped, unrolled = pair()
    assert_kernels_and_cache_agree(looped.eval())  # dense, chunked, the cache in pieces, cached generation
    x = torch.randint(0, 256, (1, 30), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert (unrolled.eval()(x) - looped(x, kernel="dense")).abs().max() <= 1e-5


@pytest.mark.parametrize("text, words", [
    ("(none)^0", "loop count 0 must be at least 1"),
    ("none^2", "a loop is '(LAYERS)^N'"),
    ("(none;rope^2)", "a loop is '(LAYERS)^N'"),
])
def test_a_bad_loop_is_one_line(text, words):
    with pytest.raises(layouts.LayoutError, match=words.replace("(", r"\(").replace(")", r"\)").replace("^", r"\^")):
        layouts.parse(text, n_layers=2, train_len=16)


def test_a_pass_of_a_loop_must_stay_its_first_passs_layer():
    stack = layouts.parse("(none;rope)^2", n_layers=4, train_len=16)
    with pytest.raises(layouts.LayoutError, match="runs the weights of layer 0"):
        stack.add_modifiers("L2=softcap:30")
    assert stack.add_modifiers("global=softcap:30").weights == stack.weights  # every pass alike: kept
    with pytest.raises(layouts.LayoutError, match="loop"):
        layouts.LayerStack(list(stack), train_len=16, weights=(0, 1, 1, 0))
