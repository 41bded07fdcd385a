"""The compiled training step: ``torch.compile`` of the step's forward, float32 loss and (through
AOTAutograd) its backward, once per model; gradient clipping, the fused AdamW step and the scheme's
constraints stay eager (fused AdamW is one kernel per parameter group already), so the learning rate
and every other per-step value never enter the graph and nothing recompiles after the first step.

Whether a run compiles is :attr:`lexkit.training.settings.TrainConfig.compile` (``--compile``/``--no-compile``;
None: :data:`DEFAULT` for the device, measured in docs/benchmarks-compile.md). A scheme, pattern or
modifier that cannot be traced as one graph says why in its ``compile_refusal``: the run names the first
such part once in a warning and trains eagerly (:func:`refusal`); a part that breaks the graph without
saying so fails the first compiled step (``fullgraph=True``), and the step falls back to eager for the
rest of the run with one warning, the same batch taken again eagerly. What ran is recorded: config.json's
``"compile"`` and, on the rows of a compiled step, the metrics' ``"compiled": true``.

Compiled and eager steps agree to the last few float32 digits, not bit for bit: inductor fuses and
reorders reductions (tests/test_compile.py measures the gap and states its bound)."""

from __future__ import annotations

import types
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..attention.kernels.record import note_ran, record_kernels

#: compile by default on this device type (docs/benchmarks-compile.md: measured on a 2-core CPU at one
#: thread, the compile time counted; CUDA not measured yet, so off)
DEFAULT: dict[str, bool] = {"cpu": False, "cuda": False}
#: the help of ``--compile`` wherever a command trains (lexkit train, study, sweep)
HELP = ("compile the training step (torch.compile: forward, loss and backward; lexkit.training.compiled), or "
        "--no-compile; "
        "a scheme, pattern or modifier that breaks the graph is named and trains eagerly; recorded in config.json "
        "(default: the device's, off on the CPU and on CUDA: docs/benchmarks-compile.md)")
#: the backend a run compiles with; the fast tests set ``"aot_eager"`` (the same tracing and autograd
#: wrapping, no inductor build: seconds less a test)
BACKEND = "inductor"


def wanted(setting: bool | None, device: torch.device | str) -> bool:
    """Whether a run compiles: the setting when given, else :data:`DEFAULT` for the device's type."""
    if setting is not None:
        return bool(setting)
    return DEFAULT.get(torch.device(device).type, False)


def refusal(model: torch.nn.Module) -> str | None:
    """Why ``model`` (a :class:`lexkit.model.gpt.GPT`) cannot train compiled, naming the first part that
    breaks the graph (its class's ``compile_refusal``): a layer's scheme, its pattern or one of its
    modifiers; None when every part traces as one graph."""
    if getattr(getattr(model, "cfg", None), "random_positions", None):
        return ("--random-positions draws each step's positions on the host (their extent is read back), "
                "which a compiled graph cannot hold")
    layers = getattr(model, "layers", ())
    for i, (layer, scheme) in enumerate(zip(layers, getattr(model, "layer_schemes", ()))):
        parts = [(f"scheme {scheme.spec}", scheme), (f"pattern {layer.pattern.spec}", layer.pattern)]
        parts += [(f"modifier +{m.spec}", m) for m in layer.modifiers]
        for what, part in parts:
            why = getattr(part, "compile_refusal", None)
            if why:
                where = "" if getattr(model, "uniform", True) else f" (layer {i})"
                return f"{what}{where} {why}"
    return None


def step_loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, device_type: str,
              dtype: torch.dtype | None) -> torch.Tensor:
    """The step's forward (under autocast to ``dtype`` when given: bf16 on CUDA) and its float32
    cross-entropy: what the compiled step traces, and what the eager step runs."""
    with torch.autocast(device_type, dtype=dtype, enabled=dtype is not None):
        logits = model(x)  # [batch, length, vocab]
    return F.cross_entropy(logits.float().flatten(0, 1), y.flatten())


class CompiledLoss:
    """``step_loss`` of one model compiled once (``dynamic=False``: every batch has the run's shape;
    ``fullgraph=True``: a break is an error, not a silent split). ``graphs`` counts the graphs the
    backend compiled: 1 after the first step, and a recompile shows as more. ``backend``: :data:`BACKEND` by
    default (inductor); the tests pass ``"eager"`` or ``"aot_eager"`` (the same tracing and autograd wrapping,
    without inductor's C++ build)."""

    def __init__(self, model: torch.nn.Module, device: torch.device, dtype: torch.dtype | None,
                 backend: str | Callable | None = None) -> None:
        from torch._dynamo import lookup_backend

        self.graphs = 0
        self.failed: str | None = None  # why tracing failed (then the caller steps eagerly)
        backend = BACKEND if backend is None else backend
        inner = lookup_backend(backend) if isinstance(backend, str) else backend

        def counted(gm, inputs):
            self.graphs += 1
            return inner(gm, inputs)

        device_type = torch.device(device).type

        def loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return step_loss(model, x, y, device_type, dtype)

        # a code object of its own: dynamo caches graphs per code object, guarded on the model it closes
        # over, so a process training run after run (a study worker) would reach the recompile limit (8)
        # at its ninth model and fail; its own code object's cache goes with it
        self.code = loss.__code__.replace()
        loss = types.FunctionType(self.code, loss.__globals__, loss.__name__, loss.__defaults__, loss.__closure__)
        self.model, self._eager = model, loss
        self.kernels: list[str] | None = None  # the attention kernels the step runs (after its first call)
        self._fn = torch.compile(loss, backend=counted, fullgraph=True, dynamic=False)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.kernels is None:  # one eager forward first fills the model's memos (the stack's resolved
            with torch.random.fork_rng(devices=[]), record_kernels() as ran:  # patterns, a rotary
                self._eager(x, y)  # scheme's frequencies: traced empty, they'd be guarded: a recompile)
            self.kernels = list(ran)  # the kernels it ran, which the trace does not record
        loss = self._fn(x, y)
        for label in self.kernels:
            note_ran(label)
        return loss


def first_call(compiled: CompiledLoss, x: torch.Tensor, y: torch.Tensor, label: str) -> torch.Tensor | None:
    """The compiled loss of the first batch, or None (with one warning naming ``label``, the model)
    when it cannot be traced as one graph: the caller steps eagerly from then on."""
    import torch._dynamo.exc as dynamo_exc

    try:
        with warnings.catch_warnings():  # torch's own deprecation notes from inside inductor's imports
            warnings.filterwarnings("ignore", message=".*torch.jit.script_method.*")
            return compiled(x, y)
    except (dynamo_exc.Unsupported, dynamo_exc.UserError, dynamo_exc.BackendCompilerFailed) as exc:
        reason = " ".join(str(exc).split())[:300]
        compiled.failed = reason
        warnings.warn(f"--compile: the training step of {label} does not trace as one graph ({reason}); "
                      "it trains eagerly", stacklevel=2)
        return None
