"""Several seeds of one run trained as one batched model: each operation does the work of every seed.

The runs of an arm differ only in their seed, so they are one graph on different weights and batches.
Each step stacks the seeds' parameters along a leading seed axis (``torch.stack``: differentiable, so
every gradient lands on its own seed's parameter) and runs the model once under ``torch.func.vmap``
(:func:`torch.func.functional_call`, functorch's model-ensembling recipe)::

    logits[s] = GPT(x[s]; θ_s)            x, logits: [S, batch, length(, vocab)]
    L = Σ_s CE(logits[s], y[s])           ∂L/∂θ_s = ∂CE_s/∂θ_s (the seeds share no parameter)

and then each seed takes its own gradient clipping, AdamW step and constraints, on its own optimizer,
exactly as :func:`lexkit.training.loop.train_step` does. Each seed keeps what a separate run of it has: its
initialisation (``torch.manual_seed(seed)`` then the model), its batches (drawn from (seed, step)
alone), its schedule, its validation and probes, its stop rule, and its own ordinary run directory
(config.json, weights, checkpoint, metrics, provenance), so every later command reads it as any run.

What is equal (tests/test_batched.py measures it): the forward of the batched model equals each seed's
own forward; after training, each seed's loss curve and weights equal a separate run's within float32
reduction-order noise (the batched matrix products and their gradients sum in another order).

What cannot be batched is refused by name (:func:`refusal`) before any run directory is touched, and
the caller trains those seeds one by one: anything that draws random numbers inside the forward
(dropout, randomized positions), a change of model mid-run (the position drop), the embedding row
resets, a fine-tune's parent, torchrun's ranks, and any layer that fails the probe (a batched forward
of the freshly built seeds compared with each seed's own forward, on the kernel a separate run picks
and then on the one that computes its scores itself: an operation vmap cannot batch, or one that
mixes the seeds, names itself there).

Measured (docs/benchmarks.md, ``benchmarks/batched.py``): on one CPU thread the batched step is
slower than the seeds one after another at table G's size and at the small preset (the step is
bound by its kernels, not by dispatch; a batched matrix product runs below the rate of the plain one),
faster only at the tiny preset; so the study and the sweep train seed by seed unless asked
(``--batch-seeds``).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.func import functional_call, vmap

from ..attention import record_kernels
from ..core.errors import LexkitError
from ..core.progress import bar
from ..core.threads import use as use_threads
from ..data.corpus import Corpus, check_splits
from ..data.mix import mix_probe, parse_mix
from ..model.gpt import GPT, ModelConfig
from . import distributed, dropping, runs, stopping
from .loop import (
    after_backward,
    check_job,
    check_loss,
    checkpoint_state,
    device_autocast,
    lr_at,
    make_optimizer,
    metrics_row,
    run_summary,
    stop_signals,
    throughput,
    validate_into,
)
from .runs import lifecycle
from .settings import TrainConfig

__all__ = ["BatchRefused", "batched_forward", "batched_step", "probe", "refusal", "train_seeds"]

#: a batched forward differs from each seed's own forward by at most this, relative to the logits'
#: scale, or the probe refuses the layout (float32 matrix products in another order: about 1e-7)
PROBE_TOLERANCE = 1e-4


class BatchRefused(LexkitError):
    """These seeds cannot be trained as one batched model (the reason names what): train them one by one."""


def refusal(model_cfg: ModelConfig, train_cfgs: list[TrainConfig], world: distributed.World | None = None,
            init=None) -> str | None:
    """Why these runs cannot be trained as one batched model, from their settings alone, or None.
    The runs must differ in their seed and nothing else."""
    if len(train_cfgs) < 2:
        return "one seed: nothing to batch"
    seeds = [c.seed for c in train_cfgs]
    if len(set(seeds)) != len(seeds):
        return f"seeds {seeds} repeat one"
    first = dataclasses.replace(train_cfgs[0], seed=0)
    for cfg in train_cfgs[1:]:
        if dataclasses.replace(cfg, seed=0) != first:
            return "the runs differ in more than their seed"
    cfg = train_cfgs[0]
    if world is not None and world.parallel:
        return "torchrun's ranks (a batched model runs in one process)"
    if model_cfg.dropout:
        return f"dropout {model_cfg.dropout:g} (each seed's dropout draws would differ from its separate run's)"
    if model_cfg.random_positions:
        return f"random_positions {model_cfg.random_positions} (drawn in every forward from the random state)"
    if dropping.schedule(model_cfg, cfg) is not None:
        return f"the position drop at {cfg.drop_positions_at:g} of the steps (the model changes mid-run)"
    if cfg.reset_unseen:
        return f"reset_unseen {cfg.reset_unseen} (embedding rows redrawn mid-run)"
    if init is not None:
        return "a fine-tune's parent (--init)"
    return None


def _stacked(models: list[GPT]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Every parameter and buffer of the seeds' models, stacked along a new leading seed axis
    [S, ...] (the parameters differentiably: each seed's gradient flows back to its own tensor)."""
    named = [dict(m.named_parameters()) for m in models]
    buffers = [dict(m.named_buffers()) for m in models]
    params = {name: torch.stack([p[name] for p in named]) for name in named[0]}
    with torch.no_grad():
        bufs = {name: torch.stack([b[name] for b in buffers]) for name in buffers[0]}
    return params, bufs


def batched_forward(models: list[GPT], x: torch.Tensor, kernel: str = "auto") -> torch.Tensor:
    """The seeds' models as one: ``x`` [S, batch, n] int64 -> logits [S, batch, n, vocab], row s
    through ``models[s]``'s weights (``models[0]``'s code runs with each seed's tensors) on ``kernel``."""
    params, bufs = _stacked(models)
    base = models[0]

    def one(p, b, tokens):
        return functional_call(base, (p, b), (tokens,), {"kernel": kernel})

    with warnings.catch_warnings():  # vmap runs an op without a batching rule once per seed (SDPA on the CPU)
        warnings.filterwarnings("ignore", message="There is a performance drop")
        return vmap(one, randomness="error")(params, bufs, x)


def probe(models: list[GPT], model_cfg: ModelConfig) -> str:
    """The attention kernel these freshly built models train on batched: ``auto`` (what a separate run
    picks) when a batched forward on it equals each model's own forward, else the kernel that computes
    its scores itself (``chunked``: a learned bias handed to the CPU's fused kernel as a mask has no
    gradient under vmap); :class:`BatchRefused` naming why when neither does. A short batch run both
    ways in training mode (gradients on, as training runs it); no state changed (gradients cleared,
    the random state kept)."""
    n = min(model_cfg.train_len, 16)
    device = next(models[0].parameters()).device
    x = torch.arange(len(models) * 2 * n, device=device).view(len(models), 2, n) % model_cfg.vocab_size
    reasons = []
    for kernel in ("auto", "chunked"):
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            try:
                together = batched_forward(models, x, kernel).detach()
            except Exception as exc:  # an op vmap cannot batch, a random draw, a data-dependent branch
                text = str(exc).strip()
                first = text.splitlines()[0][:160] if text else ""
                reasons.append(f"on the {kernel} kernel its forward cannot run batched ({type(exc).__name__}: {first})")
                continue
            apart = torch.stack([m(x[s], kernel=kernel) for s, m in enumerate(models)]).detach()
        for m in models:
            m.zero_grad(set_to_none=True)
        scale = float(apart.abs().max()) or 1.0
        worst = float((together - apart).abs().max())
        if math.isfinite(worst) and worst <= PROBE_TOLERANCE * scale:
            return kernel
        reasons.append(f"on the {kernel} kernel its batched forward differs from the seeds' own by {worst:.3g} "
                       f"(logits up to {scale:.3g}): a layer mixes the seeds")
    raise BatchRefused(f"cannot batch these seeds: layout {model_cfg.label!r}: " + "; ".join(reasons))


def batched_step(models: list[GPT], optimizers: list[torch.optim.Optimizer], x: torch.Tensor, y: torch.Tensor, *,
                 grad_clip: float, kernel: str = "auto", autocast=None,
                 check: Callable[[int, float], None] | None = None) -> tuple[list[float], list[torch.Tensor]]:
    """One optimizer step of every seed at once on inputs ``x`` and targets ``y`` (int64 [S, batch,
    length]): the batched forward (under ``autocast``), each seed's float32 mean cross-entropy, one
    backward of their sum, then per seed what :func:`lexkit.training.loop.train_step` does after its backward
    (clipping at its own norm, its AdamW step, its scheme's constraints). ``check(s, loss)`` sees each
    loss before the backward (the trainer's: a non-finite one raises, leaving every seed untouched).
    Returns the losses and each seed's gradient norm before clipping (0-d tensors). The trainer and
    benchmarks/batched.py both time this one function."""
    with autocast if autocast is not None else nullcontext():
        logits = batched_forward(models, x, kernel)  # [S, batch, length, vocab]
    losses = F.cross_entropy(logits.float().flatten(0, 2), y.flatten(), reduction="none")
    losses = losses.view(len(models), -1).mean(1)  # [S]: each seed's mean, as its own run's
    values = losses.tolist()
    if check is not None:
        for i, value in enumerate(values):
            check(i, value)
    for optimizer in optimizers:
        optimizer.zero_grad(set_to_none=True)
    losses.sum().backward()
    return values, [after_backward(model, optimizer, grad_clip) for model, optimizer in zip(models, optimizers)]


@dataclasses.dataclass
class _Seed:
    """One seed's run: its settings, model, optimizer, run directory, trainer state, stop rule state."""

    cfg: TrainConfig
    model: GPT
    optimizer: torch.optim.Optimizer
    run: runs.RunDir
    state: dict
    history: list
    began: float
    elapsed_before: float
    loss: float = math.nan
    stopped: bool = False


def train_seeds(outs: list[str | Path], model_cfg: ModelConfig, train_cfgs: list[TrainConfig], *,
                device: str = "auto", threads: int | None = None, progress: bool = True,
                corpus: Corpus | None = None) -> list[dict]:
    """Train (or resume) the runs ``outs[i]`` with ``train_cfgs[i]`` (the same settings but the seed)
    as one batched model; returns each run's summary, as :func:`lexkit.training.loop.train` does.

    :class:`BatchRefused` (nothing touched) when they cannot be batched: :func:`refusal`'s reasons,
    runs resumed from different steps, or a layout that fails the :func:`probe`. Runs already
    finished are left as they are; the rest must all start from the same step."""
    outs = [Path(o) for o in outs]
    if len(outs) != len(train_cfgs):
        raise ValueError(f"{len(outs)} run directories for {len(train_cfgs)} settings")
    reason = refusal(model_cfg, train_cfgs)
    if reason is not None:
        raise BatchRefused(f"cannot batch these seeds: {reason}")
    check_job(model_cfg, train_cfgs[0], distributed.SINGLE, threads=threads)
    states = [runs.trainer_state(o) for o in outs]
    todo = [i for i, (s, c) in enumerate(zip(states, train_cfgs)) if not runs.finished(s, c.steps)]
    starts = {(states[i] or {}).get("step", 0) for i in todo}
    if len(starts) > 1:
        raise BatchRefused(f"cannot batch these seeds: their checkpoints are at different steps ({sorted(starts)})")
    if len(todo) < 2:
        raise BatchRefused(f"cannot batch these seeds: {len(todo)} of them left to train")
    _, dev = distributed.setup(device)
    if threads is not None:
        use_threads(threads, "threads")
    starts, models, optimizers = [], [], []
    for i in todo:
        resume = (outs[i] / runs.CONFIG).is_file()
        start = lifecycle.start(outs[i], train_cfgs[i], resume, corpus, None)
        corpus = start.corpus() if corpus is None else corpus
        torch.manual_seed(start.train_cfg.seed)  # the seed's own initialisation, as its separate run draws it
        model = GPT(model_cfg).to(dev)
        starts.append(start), models.append(model), optimizers.append(make_optimizer(model, start.train_cfg))
    check_splits(corpus, model_cfg.train_len)
    kernel = probe(models, model_cfg)
    seeds: list[_Seed] = []
    try:
        for start, model, optimizer in zip(starts, models, optimizers):
            config = lifecycle.settle(start, model, corpus, distributed.SINGLE, dev)
            config["batched"] = {"seeds": [p.train_cfg.seed for p in starts], "kernel": kernel}
            run = runs.RunDir(start.out, resume=start.old is not None, expected=start.old).open()
            state = run.start(config, model, optimizer)
            began = time.perf_counter()
            seeds.append(_Seed(start.train_cfg, model, optimizer, run, state,
                               runs.read_metrics(run.path) if start.train_cfg.stop else [], began,
                               float(state.get("elapsed", 0.0))))
        _loop(seeds, model_cfg, corpus, dev, progress, kernel)
        for seed in seeds:
            seed.run.finish()
    finally:
        for seed in seeds:
            seed.run.close()
    return [run_summary(seed.state, seed.loss, seed.stopped, seed.run) for seed in seeds]


def _loop(seeds: list[_Seed], model_cfg: ModelConfig, corpus: Corpus, dev: torch.device, progress: bool,
          kernel: str) -> None:
    """Every seed from their common step to the last: one batched forward and backward a step, then
    each seed's own clipping, AdamW step, metrics row, validation, checkpoint and stop rule (a seed
    that stops leaves the batch; the others go on)."""
    cfg, length = seeds[0].cfg, model_cfg.train_len
    train_stream, valid_stream = distributed.streams(corpus, cfg.mix, cfg.eval_windows, length, distributed.SINGLE,
                                                     cfg.curriculum_steps)
    probe_docs = mix_probe(valid_stream.tokens, cfg.mix, length) if cfg.mix else {}
    rule, watched = stopping.parse(cfg.stop), list(parse_mix(cfg.mix)) if cfg.mix else []
    autocast = device_autocast(dev)
    rate_of = throughput(seeds[0].model, model_cfg, cfg.batch, dev)
    for seed in seeds:
        seed.model.train()
    first = seeds[0].state["step"]
    last = time.perf_counter()
    with stop_signals() as stop, bar(cfg.steps, f"train {model_cfg.label} x{len(seeds)} seeds batched",
                                     enabled=progress) as pbar:
        pbar.advance(first)
        for step in range(first, cfg.steps):
            active = [s for s in seeds if not s.stopped]
            if not active:
                break
            t0 = time.perf_counter()
            pairs = [train_stream.batch(step, s.cfg.batch, length, s.cfg.seed) for s in active]
            x = torch.stack([p[0] for p in pairs]).to(dev)  # [S, batch, length]
            y = torch.stack([p[1] for p in pairs]).to(dev)
            lr = lr_at(step, cfg)
            for s in active:
                for group in s.optimizer.param_groups:
                    group["lr"] = lr
            with record_kernels() as ran:
                values, norms = batched_step([s.model for s in active], [s.optimizer for s in active], x, y,
                                             grad_clip=cfg.grad_clip, kernel=kernel, autocast=autocast,
                                             check=lambda i, value, step=step, active=active: check_loss(
                                                 value, step, active[i].state, active[i].run, active[i].cfg))
            for s, value in zip(active, values):
                s.loss = value
            done = step + 1
            now = time.perf_counter()
            step_seconds, rate, last = now - t0, x.numel() / max(now - last, 1e-9), now
            evaluate_now = done % cfg.eval_every == 0 or done == cfg.steps
            signalled = stop.requested
            for s, norm in zip(active, norms):
                if evaluate_now or done % cfg.log_every == 0:
                    row = metrics_row(done, s.loss, lr, rate / len(active), norm, step_seconds, rate_of, ran,
                                      batched_seeds=len(active))  # each seed's bytes of the batched step
                    if evaluate_now:
                        s.stopped = validate_into(row, s.model, valid_stream, s.cfg, length, dev, probe_docs, rule,
                                                  s.history, watched)
                    s.run.log(row)
                if done % cfg.save_every == 0 or done == cfg.steps or signalled or s.stopped:
                    s.state = checkpoint_state(done, cfg.steps, s.stopped, s.loss,
                                               s.elapsed_before + time.perf_counter() - s.began)
                    s.run.save(s.model, s.optimizer, s.state)
            if signalled:
                for s in seeds:
                    s.run.finish()
                raise KeyboardInterrupt(f"stopped by a signal after step {done}, checkpoints written")
            pbar.advance(1, loss=sum(values) / len(values), bytes_s=rate)
