"""Training: AdamW, linear warmup then cosine decay, gradient clipping; checkpoints and resume.

The learning rate at step t of a run with ``steps`` total is
``lr·t/warmup`` for t < warmup, then ``lr·(r + (1 - r)·(1 + cos(π·u))/2)`` with
``u = (t - warmup)/(steps - warmup)`` and r = ``min_lr_ratio``. It depends only on (t, steps):
resuming with a larger ``--steps`` keeps every step already taken and follows the longer cosine
from the resume point on (so the rate rises at that point to its value under the new total).

Batch t is drawn from a generator seeded by (seed, t) alone, and the checkpoint keeps the
optimizer and RNG state, so on CPU a killed and resumed run ends with the same weights, byte for
byte, as an uninterrupted one. SIGINT and SIGTERM stop training after the step in progress,
with a checkpoint of that step (then KeyboardInterrupt: ``lexkit train`` exits 130); a second
signal stops at once. Every check that needs no write (settings, device, corpus, window length,
the parent's tensors under ``init``, the TensorBoard extra) runs before the run directory is
created or touched; then it is locked (one writer, :class:`lexkit.training.runs.RunDir`) for the whole run.

Under ``torchrun`` the same loop runs on every rank (:mod:`lexkit.training.distributed`): rank r trains on
its contiguous share of every global batch through DistributedDataParallel (or FSDP2 with
``fsdp=True``); rank 0 alone checks, locks and writes the run directory, and checkpoints hold
whole tensors either way.

This module is the step, the schedule, validation and the loop. What happens to the run directory
before the first step (its checks, the corpus, a fine-tune's parent) is :mod:`lexkit.training.runs.lifecycle`;
the settings are :mod:`lexkit.training.settings` (``configs``, ``TrainConfig``) and a fine-tune's
:func:`lexkit.training.runs.configs_from_run`; the TensorBoard curves :mod:`lexkit.training.tensorboard`; torchrun's
glue (the corpus per node, the model spread over ranks, the streams) is :mod:`lexkit.training.distributed`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
import threading
import time
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ..attention import kernel_label, record_kernels
from ..core import provenance
from ..core.device import eval_mode, training_dtype
from ..core.errors import LexkitError
from ..core.progress import bar
from ..core.threads import use as use_threads
from ..data.corpus import LN2, Corpus, Stream, check_splits
from ..data.mix import check_mix, mix_probe, parse_mix
from ..model.gpt import GPT, ModelConfig
from . import compiled, distributed, dropping, runs, stopping
from . import tensorboard as tb
from .embedding import Unseen, frozen, table_of
from .runs import lifecycle
from .settings import TrainConfig, check_model

__all__ = ["TrainError", "check_job", "device_autocast", "lr_at", "make_optimizer", "train", "train_step",
           "train_step_stats", "validation_bpb", "validation_tasks"]


class TrainError(LexkitError):
    """Training stopped (a non-finite loss)."""


def lr_at(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    span = max(1, cfg.steps - cfg.warmup)
    u = min(1.0, (step - cfg.warmup) / span)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * u)))


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW (betas 0.9, 0.95) with weight decay on matrices only: not on biases, norms, or a
    position scheme's own parameters (``scheme.*``/``schemes.*``: KERPLE's slopes, T5's table; a
    layer's temperature and sink logits are vectors). The embedding (:mod:`lexkit.training.embedding`):
    with ``cfg.embedding_decay`` in a group of its own with that decay; with ``cfg.freeze_embedding``
    its gradient switched off here and in no group. Neither given: the two groups of every run before them."""
    frozen(model, cfg.freeze_embedding)
    table = table_of(model)

    def decays(name: str, p: torch.Tensor) -> bool:
        return p.dim() >= 2 and not name.startswith(("scheme.", "schemes."))

    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    own = cfg.embedding_decay is not None and table is not None and table.requires_grad
    decay = [p for n, p in params if decays(n, p) and not (own and p is table)]
    other = [p for n, p in params if not decays(n, p)]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": other, "weight_decay": 0.0}]
    if own:
        groups.append({"params": [table], "weight_decay": cfg.embedding_decay})
    # fused: one kernel per parameter group instead of ~1,000 small ops per step
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), fused=True)


def train_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    grad_clip: float,
    autocast: AbstractContextManager | None = None,
    average: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> float:
    """One optimizer step on inputs ``x`` and targets ``y`` (int64 ``[batch, length]``): forward
    (under ``autocast``), float32 cross-entropy, backward, gradient clipping, AdamW, then the
    scheme's constraints (KERPLE's bounds). Returns the loss; a non-finite loss is returned
    before the backward pass, leaving weights and optimizer untouched. The trainer, ``lexkit
    study --dry-run`` and the benchmarks all time this one function.

    Under torchrun, ``average`` (:meth:`lexkit.training.distributed.World.mean`) makes the returned loss
    the global batch's, the same on every rank, so a non-finite loss stops every rank at the
    same step; the gradients DDP/FSDP average in backward are the global ones, so clipping
    uses the global norm."""
    return train_step_stats(model, optimizer, x, y, grad_clip=grad_clip, autocast=autocast, average=average)[0]


def train_step_stats(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    grad_clip: float,
    autocast: AbstractContextManager | None = None,
    average: Callable[[torch.Tensor], torch.Tensor] | None = None,
    loss_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> tuple[float, torch.Tensor | float]:
    """:func:`train_step`, also returning the total gradient norm before clipping (the 2-norm
    over every parameter's gradient, as ``clip_grad_norm_`` computes it; a 0-d tensor, read it
    only when logged; NaN when the loss was not finite and no step was taken). ``loss_of``: the
    forward and loss of ``x``, ``y`` in place of the eager ones (:class:`lexkit.training.compiled.CompiledLoss`,
    whose backward is compiled with it); clipping, AdamW and the constraints stay eager."""
    if loss_of is not None:
        loss = loss_of(x, y)
    else:
        with autocast if autocast is not None else nullcontext():
            logits = model(x)  # [batch, length, vocab]
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
    value = (average(loss.detach()) if average is not None else loss).item()
    if not math.isfinite(value):
        return value, math.nan
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    return value, after_backward(model, optimizer, grad_clip)


def after_backward(model: torch.nn.Module, optimizer: torch.optim.Optimizer, grad_clip: float) -> torch.Tensor:
    """What a step does once the gradients are in: clip at ``grad_clip``, the optimizer's step, the
    scheme's constraints; returns the gradient norm before clipping (0-d). The one-run step and the
    batched seeds' (:func:`lexkit.training.batched.batched_step`, per seed) both end here."""
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    core = distributed.unwrap(model)
    if isinstance(core, GPT):
        core.constrain_()
    return norm.detach()


def metrics_row(done: int, loss: float, lr: float, rate: float, grad_norm, step_seconds: float, rate_of,
                ran: list[str], **extra) -> dict:
    """One metrics row (docs/runs.md): the step, loss, learning rate, bytes/s, gradient norm, step time,
    the throughput figures ``rate_of(step_seconds)`` gives and the kernel that ran, then ``extra``."""
    return {"step": done, "loss": round(loss, 6), "lr": lr, "bytes_per_s": round(rate, 1),
            "grad_norm": round(float(grad_norm), 6), "step_seconds": round(step_seconds, 6),
            **rate_of(step_seconds), "kernel": kernel_label(ran), **extra}


def validate_into(row: dict, model: GPT, valid_stream: Stream, cfg: TrainConfig, length: int, dev: torch.device,
                  probe: dict, rule, history: list, watched: list[str]) -> bool:
    """Add validation bpb and the mix's probes to ``row``; with a stop ``rule``, append the row to
    ``history`` and return whether the rule stops the run at this step (marking the row)."""
    row["val_bpb"] = round(validation_bpb(model, valid_stream, cfg, length, dev), 6)
    row.update(validation_tasks(model, probe, dev))
    if rule is None:
        return False
    history.append(row)
    if stopping.stop_step(history, rule, watched) == row["step"]:
        row["stopped"] = True
        return True
    return False


def checkpoint_state(done: int, steps: int, stopped: bool, loss: float, elapsed: float) -> dict:
    """The trainer state a checkpoint keeps (``trainer_state.json``): the step, whether the run is
    done (its last step, or its stop rule's), the loss and the wall seconds so far."""
    state = {"step": done, "done": done == steps or stopped, "loss": loss, "elapsed": round(elapsed, 3)}
    if stopped:
        state["stopped"] = done  # by the run's stop rule: its end
    return state


def run_summary(state: dict, loss: float, stopped: bool, run: runs.RunDir | None) -> dict:
    """What :func:`train` returns: the last step, loss, elapsed seconds, the stop step and the last
    validation bpb of the run's metrics."""
    summary = {"step": state["step"], "loss": loss, "elapsed": state.get("elapsed")}
    if stopped:
        summary["stopped"] = state["step"]
    rows = [r for r in runs.read_metrics(run.path) if "val_bpb" in r] if run is not None else []
    if rows:
        summary["val_bpb"] = rows[-1]["val_bpb"]
    return summary


def device_autocast(device: torch.device) -> AbstractContextManager:
    """Autocast to :func:`~lexkit.core.device.training_dtype` (bf16 on CUDA); nothing where that is float32."""
    dtype = training_dtype(device)
    return torch.autocast(device.type, dtype=getattr(torch, dtype)) if dtype != "float32" else nullcontext()


@torch.no_grad()
def validation_bpb(model: GPT, stream: Stream, cfg: TrainConfig, length: int, device: torch.device) -> float:
    """Bits per byte on the first ``eval_windows`` validation windows at the training length."""
    x, y = stream.fixed_windows(cfg.eval_windows, length)
    total, count = 0.0, 0
    with eval_mode(model):
        for i in range(0, x.shape[0], cfg.batch):
            logits = model(x[i : i + cfg.batch].to(device))
            target = y[i : i + cfg.batch].to(device).flatten()
            nll = F.cross_entropy(logits.float().flatten(0, 1), target, reduction="sum")
            total, count = total + nll.item(), count + y[i : i + cfg.batch].numel()
    return total / count / LN2


@torch.no_grad()
def validation_tasks(model: GPT, probe: dict, device: torch.device) -> dict:
    """Each mix task's probe (:func:`lexkit.data.mix.mix_probe`): teacher-forced bits per answer byte
    (``val_<task>_bits``) and the share of documents whose argmax is right at every answer byte
    (``val_<task>_exact``, what greedy decoding reproduces on a byte model), and the share of answer
    bytes whose argmax is right (``val_<task>_acc``: one minus the per-position error the k-hop
    literature reports). Logged beside the validation bpb, so a run's curve shows when it learned the
    task (its phase change)."""
    out = {}
    with eval_mode(model):
        for task, (x, y, mask) in probe.items():
            logits = model(x.to(device)).float().cpu()  # [count, length, vocab]
            nll = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(y.shape)
            right = (logits.argmax(-1) == y) | ~mask
            out[f"val_{task}_bits"] = round(float(nll[mask].sum() / mask.sum()) / LN2, 6)
            out[f"val_{task}_exact"] = round(float(right.all(-1).float().mean()), 6)
            out[f"val_{task}_acc"] = round(float(right[mask].float().mean()), 6)
    return out


def train(
    out: str | Path,
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    *,
    resume: bool = False,
    device: str = "auto",
    threads: int | None = None,
    progress: bool = True,
    corpus: Corpus | None = None,
    fsdp: bool = False,
    world: distributed.World | None = None,
    init: str | Path | None = None,
    tensorboard: str | Path | None = None,
) -> dict:
    """Train (or resume) a run in ``out``; returns a summary (steps, final loss, validation bpb).
    ``train_cfg.data`` on resume may name the run's corpus at a new place: it is accepted when
    its fingerprint is the recorded one, and recorded from then on.

    ``world``: the ranks to train over; by default torchrun's (:func:`lexkit.training.distributed.setup`;
    one process without torchrun). ``fsdp``: shard parameters and optimizer state over them.
    ``tensorboard``: a directory for TensorBoard event files (``lexkit[tb]``) of every metrics row.

    ``init``: start from that trained run's weights (a fresh optimizer and schedule: the fine-tune
    of context extension, :func:`lexkit.training.runs.configs_from_run`), recorded under ``"init"`` in config.json
    (absolute path, scheme, length, step, weight digest); resumed before its first checkpoint,
    the fine-tune starts again from that parent, whose weights must still have that digest.
    """
    out = Path(out)
    w, dev = distributed.setup(device) if world is None else (world, distributed.rank_device(device, world))
    drop = check_job(model_cfg, train_cfg, w, fsdp=fsdp, threads=threads)  # the position drop, once per run
    start = w.on_main(lambda: lifecycle.start(out, train_cfg, resume, corpus, init))
    if w.is_main:  # rank 0 writes the curves (the extra checked before any write)
        tensorboard = tb.training_logdir(tensorboard, start.old)
    train_cfg = start.train_cfg
    corpus = distributed.node_corpus(corpus, start.corpus, w)
    w.agree(lambda: corpus is None or check_splits(corpus, model_cfg.train_len))  # before the run directory
    torch.manual_seed(train_cfg.seed)
    model = GPT(model_cfg).to(dev)
    optimizer = make_optimizer(model, train_cfg)
    config = w.on_main(lambda: lifecycle.settle(start, model, corpus, w, dev))
    compiling = compile_choice(model, train_cfg, w, dev)
    if compiling is not None:
        config["compile"] = compiling
    if tensorboard is not None:
        config["tensorboard"] = str(Path(tensorboard).absolute())
    if drop is not None:
        config["drop"] = dropping.record(drop)
        if resume and w.on_main(lambda: runs.trained_section(start.old, out, runs.CHECKPOINT)[0] != start.old["model"]):
            model = _without_positions(drop, dev)  # the checkpoint holds the model after the drop
            optimizer = make_optimizer(model, train_cfg)
    run = runs.RunDir(out, resume=resume, expected=start.old) if w.is_main else None
    try:
        state = w.on_main(lambda: run.open().start(config, model, optimizer))
        if runs.finished(state, train_cfg.steps):
            if progress and w.is_main:
                print(f"{out}: already finished ({state['step']} steps); nothing to do")
            return state
        model, optimizer = distributed.spread(model, optimizer, w, dev, fsdp=fsdp,
                                              rebuild=lambda m: make_optimizer(m, train_cfg))
        streams = distributed.streams(corpus, train_cfg.mix, train_cfg.eval_windows, model_cfg.train_len, w,
                                      train_cfg.curriculum_steps)
        curves = tensorboard is not None and run is not None
        with contextlib.closing(tb.open_writer(tensorboard, run.path)) if curves else nullcontext() as writer:
            summary = _loop(run, model, optimizer, state, streams,
                            _Job(model_cfg, train_cfg, w, dev, progress, writer, fsdp=fsdp, drop=drop,
                                 compile=bool(compiling and compiling["compiled"])))
        if run is not None:
            run.finish()
        return summary
    finally:
        if run is not None:
            run.close()


def compile_choice(model: GPT, train_cfg: TrainConfig, w: distributed.World, dev: torch.device) -> dict | None:
    """Whether this run's step compiles (:mod:`lexkit.training.compiled`), as config.json records it: None when
    it was not wanted (``--no-compile``, or the device's default off: the config as before the setting),
    else ``{"compiled": bool}`` with, when not, ``"why"``: the part that breaks the graph, named once in a
    warning where ``--compile`` was given. Under torchrun the default stays eager (``--compile`` is refused
    there, :func:`check_job`)."""
    if not compiled.wanted(train_cfg.compile, dev) or w.parallel:
        return None
    why = compiled.refusal(model)
    if why is None:
        return {"compiled": True}
    if train_cfg.compile and w.is_main:
        warnings.warn(f"--compile: {why}; this run trains eagerly", stacklevel=2)
    return {"compiled": False, "why": why}


def check_job(model_cfg: ModelConfig, train_cfg: TrainConfig, w: distributed.World, *, fsdp: bool = False,
              threads: int | None = None) -> dropping.Drop | None:
    """Refuse settings this job cannot train (the model, the mix, the batch over the ranks, FSDP
    on one process, a position drop this model cannot take) before anything is read or written; set
    the CPU threads. Returns the run's position drop (:func:`lexkit.training.dropping.schedule`; None:
    none), computed here once."""
    if threads is not None:
        use_threads(threads, "threads")
    check_model(model_cfg)
    check_mix(train_cfg.mix, model_cfg.train_len)
    if train_cfg.stop and not train_cfg.mix:
        raise ValueError(f"--stop {train_cfg.stop} watches the probe of a retrieval mix and this run has none: "
                         "give --mix too (e.g. --mix induction:0.75), or leave out --stop")
    w.check_batch(train_cfg.batch)
    if train_cfg.compile and w.parallel:
        raise ValueError("--compile trains one process's step (measured there, docs/benchmarks-compile.md) and this "
                         f"job has {w.size} under torchrun: leave out --compile (or give --no-compile)")
    drop = dropping.schedule(model_cfg, train_cfg)
    if fsdp and train_cfg.reset_unseen:
        raise ValueError(f"--reset-unseen {train_cfg.reset_unseen} writes rows of the embedding, which --fsdp shards "
                         "over the processes; give one of them (DDP, without --fsdp, resets them)")
    if fsdp and not w.parallel:
        raise ValueError("--fsdp shards over processes and this job has one (world size 1): it needs torchrun "
                         "with more than one rank (torchrun --nproc_per_node 2 -m lexkit train ...); or leave out "
                         "--fsdp")
    return drop


@dataclasses.dataclass
class _Job:
    """What the loop runs on: the settings, the ranks and device, the progress bar and the
    TensorBoard writer (rank 0's, or None)."""

    model_cfg: ModelConfig
    train_cfg: TrainConfig
    world: distributed.World
    device: torch.device
    progress: bool
    writer: Any = None
    fsdp: bool = False
    drop: dropping.Drop | None = None  # the position drop of the schedule (lexkit.training.dropping)
    compile: bool = False  # the step compiled (lexkit.training.compiled; compile_choice decided)


def _loop(run: runs.RunDir | None, model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict,
          streams: tuple[Stream, Stream], job: _Job) -> dict:
    """The training loop from ``state["step"]`` on: batch, learning rate, step; a metrics row every
    ``log_every`` steps (validation bpb every ``eval_every``), a checkpoint every ``save_every``
    and at a stop signal. ``run`` is rank 0's run directory (None on the others)."""
    cfg, w, dev, length = job.train_cfg, job.world, job.device, job.model_cfg.train_len
    train_stream, valid_stream = streams
    probe = mix_probe(valid_stream.tokens, cfg.mix, length) if cfg.mix else {}  # the mix's tasks, validated
    rule, watched = stopping.parse(cfg.stop), list(parse_mix(cfg.mix)) if cfg.mix else []
    history = w.broadcast(runs.read_metrics(run.path) if rule is not None and run is not None else [])  # resumed
    autocast = device_autocast(dev)
    rate_of = throughput(distributed.unwrap(model), job.model_cfg, cfg.batch // w.size, dev)
    model.train()
    unseen = Unseen(cfg.reset_unseen, job.model_cfg.vocab_size, state.get("seen"))  # lexkit.training.embedding's rule
    loss_value, last, stopped = float("nan"), time.perf_counter(), False
    began, elapsed_before = last, float(state.get("elapsed", 0.0))
    step_fn = _StepLoss(job)
    with stop_signals() as stop, bar(cfg.steps, f"train {job.model_cfg.label}",
                                     enabled=job.progress and w.is_main) as pbar:
        pbar.advance(state["step"])
        for step in range(state["step"], cfg.steps):
            if job.drop is not None and step >= job.drop.step and distributed.unwrap(model).cfg != job.drop.model:
                model, optimizer = _drop_positions(model, optimizer, job)  # step D: the layers lose their positions
            t0 = time.perf_counter()
            x, y = train_stream.batch(step, cfg.batch, length, cfg.seed, rows=w.rows(cfg.batch))
            if unseen:
                unseen.observe(x, y)
            x, y = x.to(dev), y.to(dev)
            lr = lr_at(step, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr
            with record_kernels() as ran:  # the attention kernel this step actually ran (metrics "kernel")
                loss_value, grad_norm = train_step_stats(model, optimizer, x, y, grad_clip=cfg.grad_clip,
                                                         autocast=autocast, average=w.mean,
                                                         loss_of=step_fn.loss_of(model, step, x, y))
            check_loss(loss_value, step, state, run, cfg)
            done = step + 1
            if unseen.due(done):
                unseen.join(w, dev)
                unseen.reset(distributed.unwrap(model).token_tables(), optimizer, cfg.seed, done)
            now = time.perf_counter()
            step_seconds, rate, last = now - t0, x.numel() * w.size / max(now - last, 1e-9), now
            evaluate_now = done % cfg.eval_every == 0 or done == cfg.steps
            if evaluate_now or done % cfg.log_every == 0:
                row = metrics_row(done, loss_value, lr, rate, grad_norm, step_seconds, rate_of, ran,
                                  **step_fn.recorded())
                if evaluate_now:  # every rank (an FSDP2 forward is collective; the same probes: the same stop)
                    stopped = validate_into(row, distributed.unwrap(model), valid_stream, cfg, length, dev, probe,
                                            rule, history, watched)
                if run is not None:
                    run.log(row)
                    if job.writer is not None:
                        job.writer.add(row)
            signalled = w.any(stop.requested, dev)
            if done % cfg.save_every == 0 or done == cfg.steps or signalled or stopped:
                state = checkpoint_state(done, cfg.steps, stopped, loss_value,
                                         elapsed_before + time.perf_counter() - began)
                if unseen:
                    unseen.join(w, dev)
                    state["seen"] = unseen.seen()
                whole, whole_optimizer = distributed.full_state(model, optimizer)  # collective under FSDP2
                if run is not None:
                    run.save(whole, whole_optimizer, state)
            if signalled:
                if run is not None:
                    run.finish()  # the session's end and wall seconds, as for a completed one
                raise KeyboardInterrupt(f"stopped by a signal after step {done}, checkpoint written")
            pbar.advance(1, loss=loss_value, bytes_s=rate)
            if stopped:
                break
    w.barrier()  # every rank leaves together (rank 0 wrote the last checkpoint)
    return run_summary(state, loss_value, stopped, run)


class _StepLoss:
    """The loop's compiled loss (:class:`lexkit.training.compiled.CompiledLoss`) when the job compiles: built for
    the model of the step (again after DroPE's drop replaces it); tracing that fails on the first step
    leaves the rest of the run eager (one warning), and a recompile after it is warned once."""

    def __init__(self, job: _Job) -> None:
        self.job, self.current, self.ran, self.warned = job, None, False, False
        dtype = training_dtype(job.device)
        self.dtype = None if dtype == "float32" else getattr(torch, dtype)

    def loss_of(self, model: torch.nn.Module, step: int, x: torch.Tensor, y: torch.Tensor):
        """The compiled loss for ``model`` at ``step`` (None: step eagerly)."""
        self.ran = False
        if not self.job.compile:
            return None
        if self.current is None or self.current.model is not model:
            self.current = compiled.CompiledLoss(model, self.job.device, self.dtype)
            first = compiled.first_call(self.current, x, y, self.job.model_cfg.label)
            if first is None:
                self.job.compile = False
                return None
            self.ran = True
            return lambda *_: first  # this step's loss, computed by the first (tracing) call
        if self.current.graphs > 1 and not self.warned:
            self.warned = True
            warnings.warn(f"--compile: the training step of {self.job.model_cfg.label} was compiled again at step "
                          f"{step} ({self.current.graphs} graphs): a value it reads changed", stacklevel=2)
        self.ran = True
        return self.current

    def recorded(self) -> dict:
        """The metrics row's ``compiled`` (only when the step ran compiled: eager rows as before)."""
        return {"compiled": True} if self.ran else {}


def _without_positions(drop: dropping.Drop, dev: torch.device) -> GPT:
    """The model after the drop, in training mode, its init drawn without touching the random state
    (the weights are about to be replaced)."""
    with torch.random.fork_rng(devices=[]):
        return GPT(drop.model).to(dev).train()


def _drop_positions(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    job: _Job) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """Step D of :mod:`lexkit.training.dropping`: the model after the drop, with every weight and AdamW
    state of ``model`` carried over (whole tensors: a collective under FSDP2), spread over the
    ranks as ``model`` was."""
    whole, whole_optimizer = distributed.full_state(model, optimizer)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    new = _without_positions(job.drop, job.device)
    new_optimizer = make_optimizer(new, job.train_cfg)
    dropping.carry(distributed.unwrap(model), whole.state_dict(), whole_optimizer.state_dict(), params, new,
                   new_optimizer)
    return distributed.spread(new, new_optimizer, job.world, job.device, fsdp=job.fsdp,
                              rebuild=lambda m: make_optimizer(m, job.train_cfg))


def check_loss(loss: float, step: int, state: dict, run: runs.RunDir | None, cfg: TrainConfig) -> None:
    """TrainError for a non-finite loss at step index ``step``, saying which checkpoint is kept."""
    if not math.isfinite(loss):
        kept = (f"the last good checkpoint (step {state['step']}) is kept in {run.path}"
                if run is not None and run.has_checkpoint else "no checkpoint was written yet")
        raise TrainError(f"loss is {loss} at step {step + 1}; training stopped, {kept} "
                         f"(a lower --lr may help; it is {cfg.lr:g})")


def throughput(model: GPT, model_cfg: ModelConfig, rows: int, dev: torch.device) -> Callable[[float], dict]:
    """A function of a step's seconds giving ``{"mfu": ...}`` for one rank's ``rows`` windows of
    the training length when the device's peak is known (:mod:`lexkit.core.provenance`), else ``{}``.
    FLOPs per step = (6·N + 12·L·d·T)·rows·T (:func:`lexkit.core.provenance.flops_per_token`)."""
    dtype = training_dtype(dev)
    name = provenance.device_name(dev)
    if provenance.peak_flops(name, dtype) is None:
        return lambda seconds: {}
    length = model_cfg.train_len
    flops = provenance.flops_per_token(model.num_params(), model_cfg.n_layers, model_cfg.d_model, length) \
        * rows * length

    def rate(seconds: float) -> dict:
        return {"mfu": round(provenance.mfu(flops / max(seconds, 1e-12), name, dtype), 6)}

    return rate


class _Stop:
    """Whether a stop signal arrived (set by the handlers of :func:`stop_signals`)."""

    requested = False


@contextlib.contextmanager
def stop_signals():
    """SIGINT and SIGTERM set ``requested`` instead of stopping at once (the loop checkpoints
    the step in progress and stops); a second one stops at once. In the main thread only (no
    handler can be set elsewhere); the previous handlers come back on exit."""
    stop = _Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum, frame):
        if stop.requested:
            raise KeyboardInterrupt
        stop.requested = True

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)

