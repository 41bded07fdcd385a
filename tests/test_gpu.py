"""The GPU lane: every claim a GPU user relies on, run by ``make test-gpu`` (``pytest -m gpu``) and
skipped without CUDA (conftest). One bf16 training step and one evaluation per scheme x (causal,
window, bca) through ``auto`` against the dense path; the flex ladder on a real CUDA kernel failure;
one compile per shape; a 1,048,576-token streamed evaluation in under 4 GiB. Also, on any machine: the
CPU dry run of benchmarks/gpu.py (the script the lane's measurements come from).
"""

from __future__ import annotations

import copy
import functools
import json
import sys
import warnings
from pathlib import Path

import pytest
import torch

from lexkit import GPT, ModelConfig, attention
from lexkit.attention import Attention, choose_kernel, kernels
from lexkit.evaluate import evaluate
from lexkit.training.loop import device_autocast, make_optimizer, train_step_stats
from lexkit.training.settings import TrainConfig
from oracle import reference_attention
from schemes_under_test import TEN

gpu = pytest.mark.gpu
W = 128  # window and bca width of the lane's patterns (the model's training length)
PATTERNS = ["causal", f"window:{W}", f"bca:{W}"]
BENCHMARKS = Path(__file__).parents[1] / "benchmarks"


def cuda_model(spec: str) -> GPT:
    torch.manual_seed(0)
    return GPT(ModelConfig(scheme=spec, n_layers=2, d_model=128, n_heads=4, train_len=W)).cuda()


def one_step(model: GPT, kernel: str, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float, str | None]:
    """One bf16-autocast training step through ``kernel``: (loss, gradient norm, kernel that ran)."""
    model.forward = functools.partial(type(model).forward, model, kernel=kernel)
    optimizer = make_optimizer(model, TrainConfig(lr=1e-3))
    try:
        with attention.record_kernels() as ran:
            loss, norm = train_step_stats(model.train(), optimizer, x, y, grad_clip=1e9,
                                          autocast=device_autocast(torch.device("cuda")))
    finally:
        del model.forward  # the class's forward again
    return loss, float(norm), attention.kernel_label(ran)


def ran_as_chosen(ran: str | None, chosen: str) -> bool:
    """The kernel that ran is auto's choice, or for flex one of the ladder's smaller flex rungs
    (reported, not a failure); never the chunked fallback in place of flex."""
    return ran == chosen or (chosen == "flex" and ran is not None and ran.startswith("flex:"))


@gpu
@pytest.mark.parametrize("pattern_spec", PATTERNS)
@pytest.mark.parametrize("spec", TEN)
def test_bf16_training_step_and_evaluation_auto_equal_dense(spec, pattern_spec):
    """auto's kernel (SDPA is_causal or compiled flex, forward and backward) gives the dense path's
    loss and gradient norm in one bf16 step, and its float32 evaluation the dense bpb; auto ran
    what choose_kernel says, never a silent fallback."""
    gen = torch.Generator().manual_seed(1)
    window = torch.randint(0, 256, (4, W + 1), generator=gen).cuda()
    x, y = window[:, :-1], window[:, 1:]
    model = cuda_model(spec)
    dense_model = copy.deepcopy(model)
    pattern = model.pattern(pattern_spec)
    loss, norm, ran = one_step(model, "auto", x, y)
    dense_loss, dense_norm, dense_ran = one_step(dense_model, "dense", x, y)
    assert ran_as_chosen(ran, choose_kernel("auto", model.scheme, pattern, x.shape[1], "cuda", True, False))
    assert dense_ran == "dense"
    assert abs(loss - dense_loss) <= 2e-2 * abs(dense_loss), (loss, dense_loss)
    assert abs(norm - dense_norm) <= 5e-2 * dense_norm, (norm, dense_norm)
    doc = bytes(torch.randint(0, 256, (8 * W,), generator=gen).tolist())
    got = evaluate(model, [doc], [W, 8 * W], [pattern_spec], kernel="auto", stream=False)["results"]
    want = evaluate(model, [doc], [W, 8 * W], [pattern_spec], kernel="dense", stream=False)["results"]
    for g, w in zip(got, want):
        if w["bpb"] is None:  # learned past its table: unavailable on every kernel
            assert g["bpb"] is None
            continue
        assert g["bpb"] is not None and abs(g["bpb"] - w["bpb"]) <= 1e-3, (g, w)
        chosen = choose_kernel("auto", model.scheme, pattern, g["length"], "cuda", False, False)
        assert ran_as_chosen(g["kernel"], chosen), (g["kernel"], chosen)


@gpu
@pytest.mark.parametrize("spec", ["alibi", "kerple-log", "t5", "fire", "pope"])
def test_compiled_flex_bias_gradients_equal_dense_in_float32(spec):
    """Compiled flex backward on CUDA (captured learnable tensors: gradients by atomic adds) against
    the dense path in float32 at a length that is not a multiple of 128 (pytorch#153799); FIRE's MLP
    in the score_mod, PoPE's q and k twice as wide as v."""
    s = cuda_model(spec).layer_schemes[0]  # FIRE: one module per layer
    n, pattern = 1000, attention.create(f"window:{W}")
    pos = torch.arange(n, device="cuda")
    base = [torch.randn(2, s.n_heads, n, s.head_dim, device="cuda") for _ in range(3)]
    grad_out = torch.randn_like(base[0])
    grads = {}
    for kernel in ("flex", "dense"):
        s.zero_grad()
        q, k, v = (t.clone().requires_grad_(True) for t in base)
        out = Attention(s, pattern, pos, kernel=kernel, training=True)(q, k, v)
        (out * grad_out).sum().backward()
        grads[kernel] = [out.detach(), q.grad, k.grad, v.grad] + [p.grad.clone() for p in s.parameters()]
    for got, want in zip(grads["flex"], grads["dense"]):  # 2e-3: room for TF32 in Triton's float32 dot
        assert torch.isfinite(got).all()
        assert float((got - want).abs().max()) <= 2e-3 * max(1.0, float(want.abs().max()))


@gpu
def test_ladder_steps_down_on_a_real_cuda_kernel_failure(monkeypatch):
    """Kernel options too large for any GPU's shared memory (128 x 128 float32 tiles of head dim 256,
    8 pipeline stages) fail to build on CUDA; the ladder warns once and the next rung (torch's own
    options) gives the reference's output."""
    monkeypatch.setattr(kernels.flex, "FLEX_DECISIONS", {})
    monkeypatch.setattr(kernels.flex, "_WARNED", set())
    huge = {"fwd_BLOCK_M": 128, "fwd_BLOCK_N": 128, "fwd_num_stages": 8, "fwd_num_warps": 4}
    monkeypatch.setattr(kernels.flex, "FLEX_RUNGS", (huge, None))
    s = cuda_model("alibi").scheme
    n, pattern = 1024, attention.create("causal")
    pos = torch.arange(n, device="cuda")
    q, k, v = (torch.randn(1, s.n_heads, n, 256, device="cuda") for _ in range(3))
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        att = Attention(s, pattern, pos, kernel="flex")
        out = att(q, k, v)
    notes = [str(w.message) for w in caught if "FlexAttention failed" in str(w.message)]
    assert att.ran == "flex" and len(notes) == 1 and "flex:128x128/8 (" in notes[0], (att.ran, notes)
    want = reference_attention(q.double(), k.double(), v.double(), s.double(), pattern, pos)
    assert float((out.double() - want).abs().max()) <= 1e-4


@gpu
@pytest.mark.parametrize("layout", [None, "hwfa:W=16,shift=0.5"])
def test_compiled_training_step_equals_eager_on_cuda(layout):
    """``lexkit train --compile``'s step on CUDA (lexkit.training.compiled: forward, loss and backward through
    inductor and Triton, bf16 autocast inside the graph, the kernels auto picks: SDPA causal for rope,
    flex under HWFA's window) against the eager step: 6 steps from the same weights on the same batches,
    one graph throughout. Bounds, derived and not yet measured on a GPU (none was lent when this was
    written): bf16 rounds to 2^-8 relative, and fused kernels round at other points than eager's, so the
    loss (~5.5) may differ by a few bf16 steps of the logits: 3e-2; AdamW moves a weight by at most
    ~lr a step whatever its gradient's size, so a gradient whose sign rounding flips moves it by 2 lr a
    step: 12 lr over 6 steps, 1.2e-2 at lr 1e-3. Either is far below a wrong graph's gap (a missed mask
    or gradient moves the first loss by more than 0.1)."""
    from lexkit.training.compiled import CompiledLoss

    torch.manual_seed(0)
    cfg = ModelConfig(scheme="rope", n_layers=2, d_model=128, n_heads=4, train_len=W,
                      layout=layout)
    eager = GPT(cfg).cuda().train()
    comp = copy.deepcopy(eager)
    train_cfg = TrainConfig(lr=1e-3)
    opt_e, opt_c = make_optimizer(eager, train_cfg), make_optimizer(comp, train_cfg)
    loss_of = CompiledLoss(comp, torch.device("cuda"), torch.bfloat16)
    gen = torch.Generator().manual_seed(0)
    for step in range(6):
        window = torch.randint(0, 256, (8, W + 1), generator=gen).cuda()
        x, y = window[:, :-1], window[:, 1:]
        a = train_step_stats(eager, opt_e, x, y, grad_clip=1.0, autocast=device_autocast(torch.device("cuda")))[0]
        b = train_step_stats(comp, opt_c, x, y, grad_clip=1.0, loss_of=loss_of)[0]
        assert abs(a - b) < 3e-2, (step, a, b)
        assert loss_of.graphs == 1, f"recompiled at step {step}"
    gap = max(float((p - q).abs().max()) for p, q in zip(eager.state_dict().values(), comp.state_dict().values()))
    assert gap < 1.2e-2


@gpu
def test_flex_compiles_once_per_shape():
    """After one warm-up step and evaluation per shape, further steps and evaluations (new Attention
    objects, new KERPLE parameter values, the cached block masks) never recompile."""
    model = cuda_model("kerple-log")
    gen = torch.Generator().manual_seed(2)
    window = torch.randint(0, 256, (4, W + 1), generator=gen).cuda()
    x, y = window[:, :-1], window[:, 1:]
    doc = bytes(torch.randint(0, 256, (4 * W,), generator=gen).tolist())

    def work():
        one_step(model, "flex", x, y)
        evaluate(model, [doc], [4 * W], [f"window:{W}"], kernel="flex", stream=False)

    work()  # warm-up: compiles the training and the evaluation shapes
    torch.compiler.set_stance("fail_on_recompile")
    try:
        work()
        work()
    finally:
        torch.compiler.set_stance("default")


@gpu
def test_streamed_evaluation_of_a_million_tokens_under_window_512_stays_under_4_gib():
    model = GPT(ModelConfig(scheme="alibi", n_layers=12, d_model=512, n_heads=8, train_len=512)).cuda()
    n = 1_048_576
    doc = bytes(torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(3)).tolist())
    torch.cuda.reset_peak_memory_stats()
    row = evaluate(model, [doc], [n], ["window:512"], kernel="auto", stream="auto")["results"][0]
    peak = torch.cuda.max_memory_allocated()
    assert row["streamed"] and row["bpb"] is not None and row["kernel"] == "chunked"
    assert peak < 4 * 1024**3, f"peak {peak / 1024**3:.2f} GiB"


# -- benchmarks/gpu.py on the CPU (no GPU needed) --------------------------------------------------
@pytest.fixture
def gpu_script(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    sys.modules.pop("gpu", None)
    import gpu as script

    return script


def test_gpu_benchmark_says_no_cuda_and_exits_0(gpu_script, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "gpu.md"
    assert gpu_script.main(["--out", str(out)]) == 0
    assert "no CUDA device here" in capsys.readouterr().out and not out.exists()


def test_gpu_benchmark_dry_run_on_the_cpu(gpu_script, tmp_path, capsys, monkeypatch):
    """--dry-run runs the lane's code on the CPU (tiny preset): a training row with the kernel that
    ran, an evaluation and the streamed evaluation, what the budget skipped, the report and its JSON.
    The queue is cut to one job of each kind it can run here (the full queue takes a minute)."""
    full = gpu_script.queue(gpu_script.DRY, 32, xt=True, cuda=False)
    kinds = {kind for kind, _, _ in full}
    assert kinds == {"train", "xt", "eval", "stream"}
    assert not any(labels["kernel"] == "flex" for kind, _, labels in full if kind == "train")  # no CPU backward
    assert full[0][2] == {"scheme": "none", "kernel": "dense"}  # the baseline first
    short = [full[0], next(j for j in full if j[0] == "eval" and j[2]["scheme"] == "alibi"),
             next(j for j in full if j[0] == "stream"), ("train", 10**6, {"scheme": "t5", "kernel": "auto"})]
    monkeypatch.setattr(gpu_script, "queue", lambda *a, **k: short)
    out = tmp_path / "gpu.md"
    assert gpu_script.main(["--dry-run", "--out", str(out), "--budget", "600"]) == 0
    printed = capsys.readouterr().out
    assert "[1/4" in printed and "skipped (time budget): job=train scheme=t5" in printed
    text, data = out.read_text(), json.loads(out.with_suffix(".json").read_text())
    assert "Dry run on the CPU" in text and "## Training" in text and "## Long evaluation" in text
    assert [(r["scheme"], r["ran"]) for r in data["train"]] == [("none", "dense")]
    assert all(r["mfu"] is None and r["tokens_per_s"] > 0 for r in data["train"])  # no peak known for a CPU
    evals = {r["job"]: r for r in data["eval"]}
    assert evals["eval"]["ran"] == "chunked" and not evals["eval"]["streamed"]  # window past 512 on the CPU
    assert evals["stream"]["streamed"] and evals["stream"]["n"] == gpu_script.DRY.stream_length
    assert data["skipped"] == ["job=train scheme=t5 kernel=auto"] and data["dry_run"] is True


def compile_arms(gpu_script) -> list[dict]:
    jobs = gpu_script.queue(gpu_script.DRY, 32, xt=False, cuda=False, compiled=True)
    return [labels for kind, _, labels in jobs if labels.get("compiled")]


def test_gpu_benchmark_queues_the_compile_arm(gpu_script):
    """--compile adds the compiled step for the baseline and the first three schemes (the fast sibling
    of the dry run below); without it, the queue is as it was."""
    assert [a["scheme"] for a in compile_arms(gpu_script)] == ["none", "alibi", "rope", "xpos"]
    assert not any(labels.get("compiled") for _, _, labels in gpu_script.queue(gpu_script.DRY, 32, xt=False,
                                                                                 cuda=False))


@pytest.mark.slow
def test_gpu_benchmark_compile_arm_dry_run_on_the_cpu(gpu_script, monkeypatch):
    """One compiled arm of benchmarks/gpu.py --compile run on the CPU through the same code (the eager
    backend: the wrapping and its graph count, no inductor build), one graph after the warm-up."""
    from lexkit.training import compiled

    arms = compile_arms(gpu_script)
    monkeypatch.setattr(compiled, "BACKEND", "eager")
    row = gpu_script.run_job("train", arms[2], gpu_script.DRY, torch.device("cpu"))
    assert row["graphs"] == 1 and row["ran"] == "dense" and row["tokens_per_s"] > 0


@gpu
def test_seeds_batched_on_one_cuda_device_are_each_seeds_own_model():
    """The GPU lane of lexkit.training.batched: three seeds of a hunt layout share one device as one batched
    model; its float32 forward is each seed's own, and bf16 steps train each seed apart."""
    from lexkit.training import batched

    cfg = ModelConfig(scheme="rope", n_layers=2, d_model=64, n_heads=4, train_len=64, layout="hwfa:W=16,shift=0.5")
    models = []
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        models.append(GPT(cfg).cuda().train())
    kernel = batched.probe(models, cfg)
    x = torch.randint(0, 257, (3, 4, 64), device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    with torch.no_grad():
        together = batched.batched_forward(models, x, kernel)
        for s, model in enumerate(models):
            torch.testing.assert_close(together[s], model(x[s], kernel=kernel), rtol=1e-3, atol=1e-3)
    before = [m.embed.weight.detach().clone() for m in models]
    optimizers = [make_optimizer(m, TrainConfig(lr=1e-3)) for m in models]
    for _ in range(3):
        losses, norms = batched.batched_step(models, optimizers, x, torch.roll(x, -1, -1), grad_clip=1.0, kernel=kernel,
                                             autocast=device_autocast(torch.device("cuda")))
        assert all(torch.isfinite(torch.tensor(losses))) and all(float(n) > 0 for n in norms)
    moved = [float((m.embed.weight - b).abs().max()) for m, b in zip(models, before)]
    assert all(v > 0 for v in moved)
    assert float((models[0].embed.weight - models[1].embed.weight).abs().max()) > 1e-3
