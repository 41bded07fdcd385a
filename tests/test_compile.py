"""The compiled training step (lexkit.training.compiled, issue 69): one graph and no recompile after the first
step, compiled equal to eager within a stated tolerance, the parts that break the graph named and
trained eagerly, what ran recorded, resume across it, and the bad input of the setting.

The fast tests compile with the ``eager`` backend (dynamo's tracing, guards and graph, run by eager
ops: the wrapping, the guards and the recompile counter of lexkit.training.compiled, without AOTAutograd's and
inductor's build, seconds a test); the tests marked slow run inductor itself, each beside the fast test
of the same code path."""

import copy
import json

import pytest
import torch

from lexkit import attention, positions
from lexkit.attention import modifiers as mods
from lexkit.data.corpus import Corpus
from lexkit.model.gpt import GPT
from lexkit.training import compiled, runs
from lexkit.training.loop import lr_at, make_optimizer, train, train_step_stats
from lexkit.training.settings import TrainConfig, configs, differences

DOCS = [(f"def f{i}(x):\n    return x * {i} + {i * i}\n" * 40).encode() for i in range(30)]
HWFA = "hwfa:W=16,shift=0.5"
CHUNKS = "rope@causal+chunks:8,n=2;none@window:8"


@pytest.fixture(scope="module")
def corpus():
    return Corpus("toy", DOCS[:-3], DOCS[-3:], {"source": "toy", "files": len(DOCS), "bytes": sum(map(len, DOCS))})


@pytest.fixture
def eager_backend(monkeypatch):
    monkeypatch.setattr(compiled, "BACKEND", "eager")


def batches(count, batch=4, length=32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        window = torch.randint(0, 256, (batch, length + 1), generator=gen)
        out.append((window[:, :-1], window[:, 1:]))
    return out


def both_ways(layout, steps, backend):
    """Eager and compiled training from the same weights on the same batches, the learning rate of the
    schedule set each step (a Python float on the optimizer, outside the graph): (losses eager, losses
    compiled, max |weight gap|, the compiled loss)."""
    model_cfg, train_cfg = configs("tiny", "rope", layout=layout, steps=steps, warmup=2)
    torch.manual_seed(0)
    eager = GPT(model_cfg).train()
    comp = copy.deepcopy(eager)
    opt_e, opt_c = make_optimizer(eager, train_cfg), make_optimizer(comp, train_cfg)
    loss_fn = compiled.CompiledLoss(comp, torch.device("cpu"), None, backend=backend)
    losses = {"eager": [], "compiled": []}
    for step, (x, y) in enumerate(batches(1) * steps):  # one batch again and again: the loss must fall
        for opt in (opt_e, opt_c):
            for group in opt.param_groups:
                group["lr"] = lr_at(step, train_cfg)
        losses["eager"].append(train_step_stats(eager, opt_e, x, y, grad_clip=1.0)[0])
        losses["compiled"].append(train_step_stats(comp, opt_c, x, y, grad_clip=1.0, loss_of=loss_fn)[0])
        assert loss_fn.graphs == 1, f"recompiled at step {step}"  # one graph from the first step on
    gap = max(float((a - b).abs().max()) for a, b in zip(eager.state_dict().values(), comp.state_dict().values()))
    return losses, gap, loss_fn


# fast sibling: test_train_compiled_is_one_graph_records_it_and_resumes_across_it (the same CompiledLoss, the eager
# backend)
@pytest.mark.slow
@pytest.mark.parametrize("layout", [None, HWFA])
def test_inductor_step_equals_eager_within_float32_noise(layout):
    """Inductor fuses and reorders the reductions (softmax, layer norm, the loss, the gradients' sums):
    float32 rounding differs by ~1e-7 relative per op and AdamW's normalized update carries it on.
    Measured here (torch 2.13 CPU, tiny, 8 steps from the same weights on one batch): losses within
    4.8e-7 (rope) and 9.5e-7 (HWFA), weights within 2.7e-6 and 3.4e-6 (of values ~0.02-1); the bounds
    1e-4 leave about 30x room and still catch a wrong graph (a wrong mask or a missed gradient moves
    the loss by more than 1e-2 on the first step)."""
    losses, gap, loss_fn = both_ways(layout, 8, "inductor")
    assert loss_fn.graphs == 1
    assert max(abs(a - b) for a, b in zip(losses["eager"], losses["compiled"])) < 1e-4
    assert gap < 1e-4


def test_each_compiled_step_has_a_code_object_of_its_own():
    """The fast sibling of the test below: two models' compiled steps trace two code objects (dynamo's
    cache is per code object), built without compiling anything."""
    model_cfg = configs("tiny", "rope", n_layers=1, d_model=16, n_heads=1)[0]
    a, b = (compiled.CompiledLoss(GPT(model_cfg), torch.device("cpu"), None, backend="eager") for _ in range(2))
    assert a.code is not b.code and a.code == b.code  # the same bytecode, two objects
    assert a.graphs == b.graphs == 0 and a.kernels is None  # nothing traced before the first call


@pytest.mark.slow
def test_run_after_run_in_one_process_each_compiles_once(monkeypatch):
    """A study worker trains run after run: each CompiledLoss traces its own code object, so every
    model compiles as the first did (one code object for all failed at the ninth model: dynamo's
    recompile limit of 8, a hard error under fullgraph; the limit set to 1 here, three models show it)."""
    import torch._dynamo.config

    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 1)
    model_cfg = configs("tiny", "rope", n_layers=1, d_model=16, n_heads=1)[0]
    x = torch.randint(0, 256, (2, 32))
    counts = []
    for _ in range(3):
        loss_fn = compiled.CompiledLoss(GPT(model_cfg).train(), torch.device("cpu"), None, backend="eager")
        loss_fn(x, x), loss_fn(x, x)
        counts.append(loss_fn.graphs)
    assert counts == [1] * 3


def test_train_compiled_is_one_graph_records_it_and_resumes_across_it(eager_backend, tmp_path, corpus, monkeypatch):
    """A compiled run of HWFA's layers (a layout that declares no break) traces one graph at its first step
    and none after, with the kernels its eager first forward ran; it records it (config.json "compile",
    metrics "compiled"); its step is the eager one (the eager backend: the same ops, the same floats): its
    loss at step 4 is an uninterrupted eager run's, and resumed eagerly it ends on that run's weights.

    An evaluation pattern resolved before does not break the step: models of one config share their layer
    stack and its resolved patterns, and a ``Sinks`` pattern an evaluation resolved there (as ``lexkit eval
    --pattern sinks:16`` does) once became a key of that memo that dynamo could not hash, and the next
    model's compiled step of that config fell back to eager training (the stack keeps its patterns under
    string keys). One compiled run for all of it: a dynamo trace of the step is most of a test's time."""
    model_cfg, train_cfg = configs("tiny", "rope", layout=HWFA, steps=8, save_every=4, eval_every=4)
    evaluated = GPT(model_cfg)
    sinks = attention.create("sinks:16")
    resolved = evaluated.pattern(sinks)
    assert resolved.spec == "sinks:16" and evaluated.pattern(sinks) is resolved  # kept, once
    made = []

    class Kept(compiled.CompiledLoss):  # the run's compiled loss, kept to be read after the run
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(compiled, "CompiledLoss", Kept)
    whole = tmp_path / "eager"
    train(whole, model_cfg, train_cfg, progress=False, corpus=corpus, device="cpu")
    assert made == []  # eager by default on the CPU
    half = tmp_path / "half"
    first = TrainConfig(**{**train_cfg.recorded(), "steps": 4, "compile": True})
    train(half, model_cfg, first, progress=False, corpus=corpus, device="cpu")
    (loss_fn,) = made
    assert loss_fn.model.stack is evaluated.stack  # the memo the evaluation left its pattern in
    assert loss_fn.failed is None and loss_fn.graphs == 1  # one graph, and no recompile at steps 2-4
    assert loss_fn.kernels == ["dense"]  # what the eager first forward ran, told to record_kernels
    config = json.loads((half / "config.json").read_text())
    assert config["compile"] == {"compiled": True} and config["train"]["compile"] is True
    assert all(r.get("compiled") is True for r in runs.read_metrics(half))
    assert differences(config, {**config, "train": {**config["train"], "compile": False}}) == []  # runtime key
    compiled_step4, eager_step4 = runs.read_metrics(half)[0], runs.read_metrics(whole)[0]
    assert compiled_step4["step"] == eager_step4["step"] == 4
    assert compiled_step4["loss"] == pytest.approx(eager_step4["loss"], abs=1e-5)
    from safetensors.torch import load_file

    torch.manual_seed(train_cfg.seed)  # the weights the runs started from (train seeds, then builds the model)
    init = GPT(model_cfg).state_dict()
    at4 = load_file(half / "model.safetensors")
    assert max(float((at4[k] - init[k]).abs().max()) for k in at4) > 1e-3  # the compiled steps trained
    rest = TrainConfig(**{**train_cfg.recorded(), "compile": False})
    train(half, model_cfg, rest, resume=True, progress=False, corpus=corpus, device="cpu")
    assert json.loads((half / "config.json").read_text())["train"]["compile"] is False
    rows = runs.read_metrics(half)
    assert [r.get("compiled") for r in rows] == [True, None]  # the rows of steps 4 and 8 (log_every 10)
    a, b = load_file(whole / "model.safetensors"), load_file(half / "model.safetensors")
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-5


def test_a_part_that_breaks_the_graph_is_named_and_trains_eagerly(eager_backend, tmp_path, corpus):
    model_cfg, train_cfg = configs("tiny", "t5", steps=2, save_every=2, eval_every=2, compile=True)
    with pytest.warns(UserWarning, match=r"--compile: scheme t5 narrows its bucket table .*trains eagerly"):
        train(tmp_path / "t5", model_cfg, train_cfg, progress=False, corpus=corpus, device="cpu")
    config = json.loads((tmp_path / "t5" / "config.json").read_text())
    assert config["compile"]["compiled"] is False and config["compile"]["why"].startswith("scheme t5 ")
    assert all("compiled" not in r for r in runs.read_metrics(tmp_path / "t5"))


def test_a_break_nobody_declared_falls_back_once(eager_backend, tmp_path, corpus, monkeypatch):
    """Without its declaration, +chunks fails the first compiled step: one warning, the same batch
    taken eagerly, the run eager from then on (nothing recorded as compiled). The fast sibling of
    test_declarations_agree_with_the_tracer too: a part that declares a break does not trace (the
    warning: CompiledLoss's trace failed); one that declares none, HWFA's layers, traces in
    test_train_compiled_is_one_graph_records_it_and_resumes_across_it."""
    monkeypatch.setattr(mods.MODIFIERS.get("chunks"), "compile_refusal", None)
    model_cfg, train_cfg = configs("tiny", "rope", layout=CHUNKS, steps=2, save_every=2, eval_every=2, compile=True)
    with pytest.warns(UserWarning, match="does not trace as one graph"):
        train(tmp_path / "chunks", model_cfg, train_cfg, progress=False, corpus=corpus, device="cpu")
    assert all("compiled" not in r for r in runs.read_metrics(tmp_path / "chunks"))


def test_default_and_refusals_declared_once():
    assert compiled.wanted(None, "cpu") is compiled.DEFAULT["cpu"]
    assert compiled.wanted(True, "cpu") and not compiled.wanted(False, "cuda")
    assert TrainConfig().recorded().get("compile", "absent") == "absent"  # unset: config.json as before
    refused = {name for name in positions.names() if positions.get(name).compile_refusal}
    assert refused == {"learned", "sandwich", "t5"}
    assert {name for name in mods.MODIFIERS.names() if mods.MODIFIERS.get(name).compile_refusal} == {"chunks"}
    net = GPT(configs("tiny", "rope", random_positions=64)[0])
    assert compiled.refusal(net).startswith("--random-positions")
    assert compiled.refusal(GPT(configs("tiny", "rope", layout=HWFA)[0])) is None


@pytest.mark.parametrize("value", ["yes", 1])
def test_compile_must_be_a_boolean(value):
    with pytest.raises(ValueError, match="compile must be true, false or null"):
        TrainConfig(compile=value)


def traces(scheme="rope", layout=None) -> bool:
    """Whether the step of a tiny model traces as one graph (what CompiledLoss compiles: fullgraph), to
    the eager loss (a break, or a tracer error, is False)."""
    import torch._dynamo.exc as dynamo_exc

    net = GPT(configs("tiny", scheme, layout=layout)[0]).train()
    x = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(1))
    want = float(compiled.step_loss(net, x, x, "cpu", None).detach())
    try:
        got = float(compiled.CompiledLoss(net, torch.device("cpu"), None, backend="eager")(x, x).detach())
    except (dynamo_exc.Unsupported, dynamo_exc.UserError):
        return False
    assert got == pytest.approx(want, abs=1e-5)
    return True


@pytest.mark.slow
def test_declarations_agree_with_the_tracer():
    """Every scheme and modifier: it traces as one graph exactly where no compile_refusal is declared."""
    for name in positions.names():
        spec = {"rerope": "rerope:w=8"}.get(name, name)
        assert traces(spec) != bool(positions.get(name).compile_refusal), name
    examples = {"softcap": "softcap:30", "topk": "topk:4", "chunks": "chunks:8,n=2", "entmax": "entmax:1.5"}
    for name in mods.MODIFIERS.names():
        if name == "adaptive":  # at inference only: nothing to train
            continue
        layout = f"rope@causal+{examples.get(name, name)};none@window:8"
        assert traces("rope", layout) != bool(mods.MODIFIERS.get(name).compile_refusal), name


def test_sweep_and_study_take_the_setting(tmp_path, monkeypatch):
    """The sweep's JSON key and the study's setting (lexkit sweep/study --compile): checked, kept only when
    given (configs written before the setting stay as they were), and handed to every run the study trains."""
    from types import SimpleNamespace

    from lexkit.study import StudyConfig
    from lexkit.study import cache as study_cache
    from lexkit.study.sweep.config import SweepConfigError, parse
    from lexkit.study.sweep.work import study_config
    from lexkit.training import distributed

    arms = [{"label": "a", "layout": "hwfa"}]
    assert parse({"arms": arms, "compile": True}).compile is True
    assert parse({"arms": arms, "compile": None}).compile is None
    assert "compile" not in parse({"arms": arms}).to_json() and parse({"arms": arms, "compile": False}).to_json()[
        "compile"] is False
    with pytest.raises(SweepConfigError, match=r"sweep config: compile: true or false is expected, got 'yes'"):
        parse({"arms": arms, "compile": "yes"})
    assert study_config(parse({"arms": arms}), compile=True).compile is True
    assert "compile" not in StudyConfig(preset="tiny", schemes=["rope"]).to_json()
    assert StudyConfig(preset="tiny", schemes=["rope"], compile=True).to_json()["compile"] is True
    seen = []
    monkeypatch.setattr(study_cache, "train", lambda run_dir, model_cfg, train_cfg, **kw: seen.append(train_cfg))
    plan = SimpleNamespace(cfg=SimpleNamespace(device="cpu", compile=True), corpus=None)
    model_cfg, train_cfg = configs("tiny", "rope")
    cache = study_cache.Cache(tmp_path, plan, distributed.SINGLE, progress=False)
    cache.trained(tmp_path / "run", model_cfg, train_cfg)
    assert seen[0].compile is True and train_cfg.compile is None  # the cell's own config untouched


def test_compile_under_torchrun_is_refused_in_one_line():
    from lexkit.training.distributed import World
    from lexkit.training.loop import check_job

    model_cfg, train_cfg = configs("tiny", "rope", compile=True)
    with pytest.raises(ValueError, match=r"^--compile trains one process's step .* this job has 2 under torchrun"):
        check_job(model_cfg, train_cfg, World(rank=0, size=2))
    check_job(model_cfg, configs("tiny", "rope")[1], World(rank=0, size=2))  # the default: eager there, no refusal
