"""The schemes since the seeds on every kernel: FIRE, PoPE, CoPE, the forgetting gates (fox) and
partial RoPE. Dense and chunked agree in outputs and in every gradient (the scheme's parameters
included) inside a model; flex, where a scheme can run on it, equals the float64 reference
forward and backward (eager here, compiled in the GPU lane); where it cannot, it refuses by
name (partial RoPE runs flex as RoPE does: test_kernels). Their oracles are in test_fire, test_pope,
test_contextual and test_positions; streaming in test_stream (schemes_under_test.ONE_OF_EACH_KIND) and
test_sample. Compiled flex runs in the GPU lane (refused on the CPU: test_gpu.py)."""

from __future__ import annotations

import copy

import pytest
import torch

import lexkit
from cli_checks import one_error_line
from lexkit import attention, positions
from lexkit.attention import Attention, choose_kernel, kernels
from lexkit.cli import main
from test_kernels import Decided, assert_parity, flex_parity

NEW = ["fire", "pope", "cope", "fox", "rope:fraction=0.5,heads=1", "xpos:fraction=0.25"]
#: FIRE's MLP unrolled per score: 2 units. Partial RoPE runs flex as RoPE does (q and k rotated by the scheme's
#: transform_qk before the kernel, no score_mod): slow, its fast sibling test_kernels' eager rope case (the same
#: flex path; the partial rotation is the dense and chunked kernels' in the model test above, and test_positions'
#: oracle)
ON_FLEX = [pytest.param("rope:fraction=0.5,heads=1", marks=pytest.mark.slow), "pope", "fire:width=2,L=64"]
SCORES_ONLY = ["cope", "fox"]


def model_pass(spec: str, kernel: str, pattern: str, tokens: torch.Tensor):
    """Logits and every parameter's gradient of a tiny model (seed 0) attending through ``kernel``."""
    torch.manual_seed(0)
    model = lexkit.GPT(lexkit.ModelConfig(scheme=spec, n_layers=2, d_model=32, n_heads=2, train_len=16))
    with torch.no_grad():  # sharper than the init, so the position terms matter
        for name, p in model.named_parameters():
            if p.dim() == 2 and not name.startswith(("embed", "scheme")):  # scheme. and schemes. (per layer)
                p.mul_(8)
    logits = model(tokens, pattern=pattern, kernel=kernel)
    (logits.float().square().mean()).backward()
    return logits.detach(), {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize("pattern", ["causal", "window:40"])
@pytest.mark.parametrize("spec", NEW)
def test_dense_and_chunked_agree_with_gradients_in_a_model(spec, pattern, monkeypatch):
    """120 tokens in chunked query blocks of 48 (48 + 48 + 24, the window of 40 across each edge): several
    chunks of queries, at 40 % of the work of 300 tokens in blocks of 256; the scheme's own parameters get
    the same gradients."""
    monkeypatch.setattr(kernels.step, "CHUNK", 48)
    tokens = torch.randint(0, 256, (2, 120), generator=torch.Generator().manual_seed(1))
    dense, dense_grads = model_pass(spec, "dense", pattern, tokens)
    chunked, chunked_grads = model_pass(spec, "chunked", pattern, tokens)
    assert (dense - chunked).abs().max() <= 1e-4 * dense.abs().max(), spec
    own = [name for name in dense_grads if name.startswith(("scheme.", "schemes."))]
    assert own or spec.startswith(("rope", "xpos")), spec  # every learned scheme is in the comparison
    for name, want in dense_grads.items():
        got = chunked_grads[name]
        assert torch.isfinite(got).all() and (got - want).abs().max() <= 1e-4 * max(want.abs().max(), 1e-6), name
    assert all(dense_grads[name].abs().sum() > 0 for name in own), spec  # the parameters learn


def spread(s) -> None:
    """Parameters whose gradient is not zero: FIRE's hidden units break inside the inputs' range
    [0, 1] (a unit on or off everywhere only adds a constant per head, which the softmax ignores);
    PoPE's phases away from the clamp's edges."""
    if s.name == "fire":
        s.w1.copy_(torch.tensor([3.0, -2.0]))
        s.b1.copy_(torch.tensor([-0.6, 1.6]))  # breakpoints 0.2 and 0.8
    if s.name == "pope":
        s.phase.uniform_(-6.0, -0.3)


@pytest.mark.parametrize("spec", ON_FLEX)
def test_eager_flex_forward_and_gradients_match_reference(eager_flex, monkeypatch, spec):
    """FIRE at L = 64 under 262 positions: the normaliser moves with the query inside the score_mod."""
    monkeypatch.setattr(kernels.flex, "FLEX_DECISIONS", Decided())
    assert_parity(flex_parity(spec, "window:64" if spec == "pope" else "causal", prepare=spread), spec)


@pytest.mark.parametrize("spec", SCORES_ONLY)
def test_flex_refuses_the_contextual_schemes_by_name_and_auto_never_picks_it(spec):
    s, causal = positions.create(spec, n_heads=2, head_dim=16), attention.create("causal")
    with pytest.raises(ValueError, match=f"kernel 'flex' cannot run scheme {spec}: its .*use kernel 'dense'"):
        Attention(s, causal, torch.arange(64), kernel="flex")
    assert choose_kernel("auto", s, causal, 512, "cuda", True, False) == "dense"
    assert choose_kernel("auto", s, causal, 4096, "cuda", False, False) == "chunked"


def test_schemes_lists_them(capsys):
    assert main(["schemes"]) == 0
    out = capsys.readouterr().out
    for name in ("fire", "pope", "cope", "fox"):
        assert f"\n{name} " in out, name
    assert "fraction=auto" in out and "heads=auto" in out  # partial RoPE on every rotary scheme (auto: all)


@pytest.mark.parametrize("spec, words", [
    ("rope:fraction=0", ["fraction=0", "(0, 1]"]),
    ("xpos:fraction=2", ["fraction=2", "(0, 1]"]),
    ("fire:slope=1", ["'slope'", "width, c, L"]),
    ("pope:phase=random", ["phase=random", "zero, uniform"]),
    ("cope:max_pos=1", ["max_pos=1", ">= 2"]),
    ("fox:bias=5", ["'bias'", "bias_init"]),
])
def test_bad_specs_are_one_error_line(tmp_path, capsys, spec, words):
    out = tmp_path / "run"
    assert main(["train", "--scheme", spec, "--preset", "tiny", "--out", str(out), "--quiet"]) == 2
    line = one_error_line(capsys)
    assert all(w in line for w in words), line
    assert not out.exists()


def test_study_since_seeds_adds_them_to_the_schemes_given(monkeypatch):
    """The knob that studies them (the default study is unchanged): --since-seeds appends them."""
    from lexkit.cli import study as cli_study

    class Planned(Exception):
        pass

    def capture(cfg, *args, **kwargs):
        raise Planned(cfg.schemes)

    monkeypatch.setattr(cli_study, "Study", capture)
    for argv, want in [(["--scheme", "rope", "--since-seeds"], ["rope", *positions.SINCE_SEEDS]),
                       (["--since-seeds"], [*cli_study.DEFAULT_SCHEMES, *positions.SINCE_SEEDS]),
                       ([], list(cli_study.DEFAULT_SCHEMES))]:
        with pytest.raises(Planned) as planned:
            main(["study", "--out", "unused", "--dry-run", *argv])
        assert planned.value.args[0] == [positions.canonical(s) for s in want], argv


def test_empirical_resolution_of_every_new_scheme():
    """Through the score hook (chunked kernel, each layer's context for fox): R per layer in [0, 1]."""
    from kit import tiny_gpt
    from lexkit import resolution as res

    tokens = torch.randint(0, 256, (2, 48), generator=torch.Generator().manual_seed(3))
    for spec in positions.SINCE_SEEDS + ["rope:fraction=0.5"]:
        out = res.empirical(tiny_gpt(spec, max_len=4096, spread=True), tokens, "causal")
        assert len(out["per_layer"]) == 2 and all(0.0 <= r <= 1.0 for r in out["per_layer"]), spec
        assert torch.isfinite(out["curve"]).all(), spec


# -- the GPU lane (make test-gpu): skipped without CUDA ---------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("spec", NEW)
def test_bf16_training_step_auto_equals_dense_on_cuda(spec):
    """auto on CUDA (flex for FIRE and partial RoPE under a bias-free mask, SDPA for PoPE, dense for
    the contextual schemes) gives the dense path's loss and gradient norm in one bf16 step."""
    from test_gpu import W, cuda_model, one_step, ran_as_chosen

    window = torch.randint(0, 256, (4, W + 1), generator=torch.Generator().manual_seed(1)).cuda()
    model = cuda_model(spec)
    dense_model = copy.deepcopy(model)
    loss, norm, ran = one_step(model, "auto", window[:, :-1], window[:, 1:])
    dense_loss, dense_norm, _ = one_step(dense_model, "dense", window[:, :-1], window[:, 1:])
    chosen = choose_kernel("auto", model.layer_schemes[0], model.pattern("causal"), W, "cuda", True, False)
    assert ran_as_chosen(ran, chosen), (ran, chosen)
    assert abs(loss - dense_loss) <= 2e-2 * abs(dense_loss) and abs(norm - dense_norm) <= 5e-2 * dense_norm
