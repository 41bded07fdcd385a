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
created or touched; then it is locked (one writer, :class:`lexkit.runs.RunDir`) for the whole run.

Under ``torchrun`` the same loop runs on every rank (:mod:`lexkit.distributed`): rank r trains on
its contiguous share of every global batch through DistributedDataParallel (or FSDP2 with
``fsdp=True``); rank 0 alone checks, locks and writes the run directory, and checkpoints hold
whole tensors either way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import signal
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from . import checks, distributed, presets, provenance, runs
from .api import callable_module
from .attention import kernel_label, record_kernels
from .data import (
    LN2,
    Corpus,
    DataError,
    MixedStream,
    Stream,
    absolute_spec,
    check_mix,
    format_mix,
    load_corpus,
    parse_mix,
    same_corpus,
    tokens_of,
)
from .device import eval_mode
from .errors import LexkitError, RunError
from .model import GPT, ModelConfig
from .progress import bar


class TrainError(LexkitError):
    """Training stopped (a non-finite loss)."""


@dataclasses.dataclass
class TrainConfig:
    steps: int = 1000
    batch: int = 32
    lr: float = 2e-3
    warmup: int = 100
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0
    data: str = "stdlib"
    eval_every: int = 250
    eval_windows: int = 64
    save_every: int = 250
    log_every: int = 10
    mix: str = ""  # retrieval documents among the windows, "passkey:0.05,copy:0.1" (data.MixedStream)

    def __post_init__(self) -> None:
        self.mix = format_mix(parse_mix(self.mix))
        for key in ("steps", "batch", "eval_every", "save_every", "log_every", "eval_windows"):
            checks.number(key, getattr(self, key))
        checks.number("warmup", self.warmup, strict=False)
        checks.number("lr", self.lr, maximum=checks.MAX_LR, integer=False)
        checks.number("min_lr_ratio", self.min_lr_ratio, maximum=1.0, strict=False, integer=False)
        checks.number("weight_decay", self.weight_decay, maximum=checks.MAX_LR, strict=False, integer=False)
        checks.number("grad_clip", self.grad_clip, maximum=1e9, integer=False)
        checks.number("seed", self.seed, maximum=2**63 - 1, strict=False)


#: settings that may change on --resume without changing the run
RUNTIME_KEYS = {"save_every", "log_every", "eval_every"}


def configs(preset: str = "small", scheme: str = "rope", **overrides) -> tuple[ModelConfig, TrainConfig]:
    """Model and training configs from a preset, with explicit overrides (None = preset's value)."""
    values = presets.get(preset)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return split_settings(scheme, values)


def configs_from_run(run_dir: str | Path, scheme: str | None = None, **overrides) -> tuple[ModelConfig, TrainConfig]:
    """Configs that continue a trained run (``lexkit train --init RUN``): its architecture and
    training settings, ``scheme`` (default: its own) and explicit overrides (None = the run's).

    The short fine-tune of position interpolation and YaRN: e.g. ``scheme="rope:scaling=yarn,factor=4"``
    with ``train_len`` 4x the run's. Every parameter of the new scheme that defaults to the
    training length (a scaled RoPE's ``original_len``, ReRoPE's ``w``, ``learned``'s table) and is
    not in its spec is pinned to the *run's* length, written into the spec, so that the new,
    longer ``train_len`` does not move it.
    """
    from . import positions

    old = runs.read_config(run_dir, training=True)
    fixed = [f"{flag} {overrides[key]} ({old['model'][key]} in {run_dir})"
             for key, flag in (("n_layers", "--layers"), ("d_model", "--dim"), ("n_heads", "--heads"))
             if overrides.get(key) is not None and overrides[key] != old["model"].get(key)]
    if fixed:
        raise ValueError(f"--init fine-tunes the weights of {run_dir}, whose shape is fixed: {', '.join(fixed)} "
                         "cannot load them")
    values = {**old["model"], **old["train"]}
    values.update({k: v for k, v in overrides.items() if v is not None})
    length = ModelConfig(**old["model"]).position_len
    if old["model"].get("layout") is not None and overrides.get("layout") is None:
        # the parent's layers as they were at its length (every length default written out)
        from . import layouts

        layers = ModelConfig(**old["model"]).layers()
        if scheme is not None:
            layers = layouts.override_schemes(layers, scheme, length)
        values["layout"] = layouts.canonical(layers)
        return split_settings(values.pop("scheme"), values)
    values.pop("scheme", None)
    return split_settings(positions.pin(scheme if scheme is not None else old["model"]["scheme"], length), values)


def split_settings(scheme: str, values: dict) -> tuple[ModelConfig, TrainConfig]:
    """One flat dict of settings -> (ModelConfig, TrainConfig); an unknown key is a ValueError."""
    model_keys = {f.name for f in dataclasses.fields(ModelConfig)}
    train_keys = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = set(values) - model_keys - train_keys
    if unknown:
        raise ValueError(f"unknown setting(s) {sorted(unknown)}")
    model = ModelConfig(scheme=scheme, **{k: v for k, v in values.items() if k in model_keys and k != "scheme"})
    check_model(model)
    train = TrainConfig(**{k: v for k, v in values.items() if k in train_keys})
    return model, train


def check_model(cfg: ModelConfig) -> None:
    """Sizes a user gives, within what fits (ModelConfig checks they are positive)."""
    checks.number("train_len", cfg.train_len, maximum=checks.MAX_TRAIN_LEN)
    for key in ("n_layers", "d_model", "n_heads"):
        checks.number(key, getattr(cfg, key), maximum=1 << 16)


def lr_at(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    span = max(1, cfg.steps - cfg.warmup)
    u = min(1.0, (step - cfg.warmup) / span)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * u)))


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW (betas 0.9, 0.95) with weight decay on matrices only: not on biases, norms, or a
    position scheme's own parameters (``scheme.*``/``schemes.*``: KERPLE's slopes, T5's table; a
    layer's temperature and sink logits are vectors)."""
    def decays(name: str, p: torch.Tensor) -> bool:
        return p.dim() >= 2 and not name.startswith(("scheme.", "schemes."))

    decay = [p for n, p in model.named_parameters() if decays(n, p)]
    other = [p for n, p in model.named_parameters() if not decays(n, p)]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": other, "weight_decay": 0.0}]
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

    Under torchrun, ``average`` (:meth:`lexkit.distributed.World.mean`) makes the returned loss
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
) -> tuple[float, torch.Tensor | float]:
    """:func:`train_step`, also returning the total gradient norm before clipping (the 2-norm
    over every parameter's gradient, as ``clip_grad_norm_`` computes it; a 0-d tensor, read it
    only when logged; NaN when the loss was not finite and no step was taken)."""
    with autocast if autocast is not None else nullcontext():
        logits = model(x)  # [batch, length, vocab]
    loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
    value = (average(loss.detach()) if average is not None else loss).item()
    if not math.isfinite(value):
        return value, math.nan
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    core = distributed.unwrap(model)
    if isinstance(core, GPT):
        core.constrain_()
    return value, norm.detach()


def device_autocast(device: torch.device) -> AbstractContextManager:
    """bf16 autocast on CUDA; nothing elsewhere (CPU trains in float32)."""
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()


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


def run_config(model_cfg: ModelConfig, train_cfg: TrainConfig, corpus: Corpus) -> dict:
    from . import __version__

    return {
        "version": runs.FORMAT_VERSION,
        "lexkit": __version__,
        "torch": torch.__version__,
        "model": dataclasses.asdict(model_cfg),
        "train": dataclasses.asdict(train_cfg),
        "data": {"spec": corpus.spec, "fingerprint": corpus.fingerprint,
                 **({"mix": train_cfg.mix} if train_cfg.mix else {})},
    }


def differences(old: dict, new: dict) -> list[str]:
    """Keys whose values differ between two configs (model.*, train.*), runtime keys ignored. A
    key an older config lacks reads as its default (``model.logn``: False)."""
    out = []
    defaults = {"model": dataclasses.asdict(ModelConfig()), "train": dataclasses.asdict(TrainConfig())}
    for section in ("model", "train"):
        for key in sorted(set(old[section]) | set(new[section])):
            if section == "train" and key in RUNTIME_KEYS:
                continue
            if old[section].get(key, defaults[section].get(key)) != new[section].get(key):
                out.append(f"{section}.{key} ({old[section].get(key)!r} -> {new[section].get(key)!r})")
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

    ``world``: the ranks to train over; by default torchrun's (:func:`lexkit.distributed.setup`;
    one process without torchrun). ``fsdp``: shard parameters and optimizer state over them.
    ``tensorboard``: a directory for TensorBoard event files (``lexkit[tb]``) of every metrics row.

    ``init``: start from that trained run's weights (a fresh optimizer and schedule: the fine-tune
    of context extension, :func:`configs_from_run`), recorded under ``"init"`` in config.json
    (absolute path, scheme, length, step, weight digest); resumed before its first checkpoint,
    the fine-tune starts again from that parent, whose weights must still have that digest.
    """
    out = Path(out)
    w, dev = distributed.setup(device) if world is None else (world, distributed.rank_device(device, world))
    check_job(model_cfg, train_cfg, w, fsdp=fsdp, threads=threads)
    tb = tensorboard_module() if tensorboard is not None and w.is_main else None  # before any write
    plan = w.on_main(lambda: _check(out, train_cfg, resume, corpus, init))
    train_cfg = plan.train_cfg
    corpus = _corpus(corpus, lambda: run_corpus(plan.old, out, train_cfg.data if plan.moved else None) if resume
                     else load_corpus(train_cfg.data), w)

    torch.manual_seed(train_cfg.seed)
    model = GPT(model_cfg).to(dev)
    optimizer = make_optimizer(model, train_cfg)
    config = w.on_main(lambda: _settle(plan, model, corpus, w, dev))
    if tensorboard is not None:
        config["tensorboard"] = str(Path(tensorboard).absolute())
    run = runs.RunDir(out, resume=resume, expected=plan.old) if w.is_main else None
    try:
        state = w.on_main(lambda: run.open().start(config, model, optimizer))
        if state.get("done") and state["step"] >= train_cfg.steps:
            if progress and w.is_main:
                print(f"{out}: already finished ({state['step']} steps); nothing to do")
            return state
        model, optimizer = _spread(model, optimizer, train_cfg, w, dev, fsdp)
        streams = _streams(corpus, train_cfg, model_cfg.train_len, w)
        with contextlib.closing(tb.open_writer(Path(tensorboard))) if tb is not None else nullcontext() as writer:
            summary = _loop(run, model, optimizer, state, streams, _Job(model_cfg, train_cfg, w, dev, progress, writer))
        if run is not None:
            run.finish()
        return summary
    finally:
        if run is not None:
            run.close()


def check_job(model_cfg: ModelConfig, train_cfg: TrainConfig, w: distributed.World, *, fsdp: bool = False,
              threads: int | None = None) -> None:
    """Refuse settings this job cannot train (the model, the mix, the batch over the ranks, FSDP
    on one process) before anything is read or written; set the CPU threads."""
    if threads is not None:
        checks.number("threads", threads, maximum=4096)
        torch.set_num_threads(threads)
    check_model(model_cfg)
    check_mix(train_cfg.mix, model_cfg.train_len)
    w.check_batch(train_cfg.batch)
    if fsdp and not w.parallel:
        raise ValueError("--fsdp shards over processes and this job has one (world size 1): it needs torchrun "
                         "with more than one rank (torchrun --nproc_per_node 2 -m lexkit train ...); or leave out "
                         "--fsdp")


def tensorboard_module():
    """:mod:`lexkit.tensorboard` with its extra, checked by opening a writer on a scratch
    directory; a missing extra is one error line naming what to install."""
    import importlib
    import tempfile

    try:
        module = importlib.import_module("lexkit.tensorboard")
    except ImportError as exc:
        raise LexkitError("--tensorboard needs the TensorBoard extra: pip install 'lexkit[tb]'") from exc
    with tempfile.TemporaryDirectory() as scratch:
        module.open_writer(Path(scratch)).close()
    return module


@dataclasses.dataclass
class _Plan:
    """What this command does to ``out``, as rank 0 settles it before anything is written."""

    out: Path
    train_cfg: TrainConfig  # the corpus path made absolute
    old: dict | None = None  # the stored config.json (on resume)
    moved: bool = False  # the corpus at a new place (a new --data on resume)
    init: str | Path | None = None  # the parent run (a new fine-tune)


def _check(out: Path, train_cfg: TrainConfig, resume: bool, corpus: Corpus | None,
           init: str | Path | None) -> _Plan:
    """Before anything is written: the directory is a run to resume, or new and writable."""
    if resume:
        old = runs.read_config(out, training=True)
        moved = train_cfg.data != old["train"]["data"]
        if moved and corpus is None:
            train_cfg = dataclasses.replace(train_cfg, data=absolute_spec(train_cfg.data))
        return _Plan(out, train_cfg, old, moved)
    runs.check_new(out)
    if corpus is None:
        train_cfg = dataclasses.replace(train_cfg, data=absolute_spec(train_cfg.data))
    return _Plan(out, train_cfg, init=init)


def _check_resume(out: Path, old: dict, new: dict, train_cfg: TrainConfig, corpus: Corpus, moved: bool) -> None:
    diff = [d for d in differences(old, new) if not d.startswith("train.steps ")
            and not (moved and d.startswith("train.data "))]
    if diff:
        raise RunError(f"cannot resume {out} with changed settings: {', '.join(diff)}")
    if new["train"]["steps"] < old["train"]["steps"]:
        raise RunError(f"cannot resume {out} with fewer steps ({train_cfg.steps} < {old['train']['steps']})")
    if not same_corpus(old["data"]["fingerprint"], corpus.fingerprint):
        what = f"the corpus at {corpus.spec!r} is not the one {out} trained on" if moved else \
            f"the corpus {corpus.spec!r} changed since {out} was started"
        raise RunError(f"{what} (fingerprint differs: {old['data']['fingerprint'].get('sha256')} recorded, "
                       f"{corpus.fingerprint.get('sha256')} here)")
    if (out / runs.WEIGHTS).is_file() and not (out / runs.CHECKPOINT).is_file():
        raise RunError(f"{out} has trained weights but no {runs.CHECKPOINT}: resuming would train again from "
                       f"step 0 and overwrite them. To start over, remove {out} or train into another --out")


def run_corpus(config: dict, out: Path, moved_to: str | None = None) -> Corpus:
    """The run's training corpus: where config.json recorded it, or ``moved_to`` (checked by the
    caller against the recorded fingerprint)."""
    spec = moved_to or config["data"]["spec"]
    try:
        return load_corpus(spec)
    except DataError as exc:
        if moved_to is None and "does not exist" in str(exc):
            raise DataError(f"the corpus {spec!r} recorded in {out / runs.CONFIG} does not exist here; if it "
                            "moved, give its new place with --data PATH (checked by its fingerprint)") from exc
        raise


def _settle(plan: _Plan, model: GPT, corpus: Corpus, w: distributed.World, dev: torch.device) -> dict:
    """Rank 0's last checks, none of which writes: the settings against the stored run (on
    resume), one training window fits the corpus and the scheme, and the parent's weights (under
    ``init``, or a fine-tune resumed before its first checkpoint) loaded into ``model``. Returns
    the config.json to write."""
    model_cfg, out, old = model.cfg, plan.out, plan.old
    new = run_config(model_cfg, plan.train_cfg, corpus)
    new["provenance"] = provenance.collect(w, dev, "bfloat16" if dev.type == "cuda" else "float32")
    if old is not None:
        _check_resume(out, old, new, plan.train_cfg, corpus, plan.moved)
        if "init" in old:
            new["init"] = old["init"]
    elif plan.init is not None:
        new["init"] = init_provenance(plan.init)
    tokens = sum(len(d) + 1 for d in corpus.train)  # BOS before every document
    if tokens < model_cfg.train_len + 1:
        raise DataError(f"--train-len {model_cfg.train_len}: the training split of {corpus.spec!r} has "
                        f"{tokens:,} tokens, fewer than one window of {model_cfg.train_len + 1}")
    try:  # the scheme is defined at every training position (a learned table long enough)
        model.embed_positions(torch.tensor([0, model_cfg.train_len - 1], device=dev))
    except ValueError as exc:
        raise ValueError(f"--scheme {model_cfg.scheme} cannot train at --train-len {model_cfg.train_len}: "
                         f"{exc}") from exc
    if "init" in new and (old is None or not (out / runs.CHECKPOINT).is_file()):
        load_parent(model, new["init"], resumed=old is not None, out=out)
    return new


def load_parent(model: GPT, parent: dict, *, resumed: bool, out: Path) -> None:
    """Load the weights of a fine-tune's parent run (``parent``: config.json's ``"init"``) into
    ``model``. On resume the parent's weight file must still be the one recorded (sha256); a
    mismatch of tensors names the scheme parameters it needs or lacks, blaming ``--scheme``."""
    run = Path(parent["run"])
    weights = run / runs.WEIGHTS
    if resumed:
        where = f"cannot resume {out}: it fine-tunes {run} and has no checkpoint yet, so it starts again from {run}"
        if not weights.is_file():
            raise RunError(f"{where}, whose {runs.WEIGHTS} is missing; restore it, or start the fine-tune anew")
        digest = hashlib.sha256(weights.read_bytes()).hexdigest()
        if digest != parent.get("sha256"):
            raise RunError(f"{where}, whose {runs.WEIGHTS} changed since (sha256 {digest[:12]}..., "
                           f"{str(parent.get('sha256'))[:12]}... recorded); restore it, or start the fine-tune anew")
    tensors = runs.read_weights(run, recorded=runs.read_config(run)["model"], model=model)
    missing, extra, bad = runs.mismatch(model, tensors)
    if missing or extra or bad:
        raise RunError(f"--init {run}: --scheme {model.cfg.scheme} does not match the weights of {run} (trained "
                       f"with {parent['scheme']}): " + runs.fit_problem(missing, extra, bad))
    model.load_state_dict(tensors, strict=False)


def _corpus(corpus: Corpus | None, load: Callable[[], Corpus], w: distributed.World) -> Corpus | None:
    """The corpus, loaded by one rank per node under torchrun (None on the others), the same
    (by fingerprint) on every node."""
    if corpus is None and w.local_rank == 0:
        corpus = w.agree(load)
    elif w.parallel:
        w.agree(lambda: None)  # the loading ranks' collective
    prints = w.gather(corpus.fingerprint if corpus is not None else None)
    for rank, fingerprint in enumerate(prints):
        if fingerprint is not None and fingerprint != prints[0]:
            raise distributed.RankError(
                f"rank {rank} reads a different corpus than rank 0 ({fingerprint} != {prints[0]}); "
                "every node needs the same data")
    return corpus


def _spread(model: GPT, optimizer: torch.optim.Optimizer, train_cfg: TrainConfig, w: distributed.World,
            dev: torch.device, fsdp: bool) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """Rank 0's weights, optimizer and RNG state on every rank; the model wrapped for DDP or
    sharded by FSDP2 (its optimizer rebuilt over the shards)."""
    if not w.parallel:
        return model, optimizer
    distributed.sync_from_main(model, w)
    opt_state = w.broadcast(optimizer.state_dict() if w.is_main else None)
    torch.set_rng_state(w.broadcast(torch.get_rng_state()))
    model = distributed.wrap(model, w, dev, fsdp=fsdp)
    if fsdp:
        optimizer = make_optimizer(model, train_cfg)
        distributed.load_optimizer(optimizer, opt_state)
    elif not w.is_main:
        optimizer.load_state_dict(opt_state)
    return model, optimizer


def _streams(corpus: Corpus | None, train_cfg: TrainConfig, length: int, w: distributed.World) -> tuple[Stream, Stream]:
    """The training stream (one copy per node under torchrun) and the validation windows
    (rank 0's, handed to every rank)."""
    key = w.broadcast(hashlib.sha256(json.dumps(corpus.fingerprint, sort_keys=True).encode()).hexdigest()[:16]
                      if w.is_main else None)
    train_stream = Stream(tokens=distributed.shared_tokens(lambda: tokens_of(corpus.train), key, w))
    if train_cfg.mix:
        train_stream = MixedStream(train_stream.tokens, train_cfg.mix)
    if not w.parallel:
        return train_stream, Stream(corpus.valid)
    head = Stream(corpus.valid).tokens[: train_cfg.eval_windows * length + 1] if w.is_main else None
    return train_stream, Stream(tokens=w.broadcast(head))


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


def _loop(run: runs.RunDir | None, model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict,
          streams: tuple[Stream, Stream], job: _Job) -> dict:
    """The training loop from ``state["step"]`` on: batch, learning rate, step; a metrics row every
    ``log_every`` steps (validation bpb every ``eval_every``), a checkpoint every ``save_every``
    and at a stop signal. ``run`` is rank 0's run directory (None on the others)."""
    cfg, w, dev, length = job.train_cfg, job.world, job.device, job.model_cfg.train_len
    train_stream, valid_stream = streams
    autocast = device_autocast(dev)
    rate_of = throughput(distributed.unwrap(model), job.model_cfg, cfg.batch // w.size, dev)
    model.train()
    loss_value, last = float("nan"), time.perf_counter()
    began, elapsed_before = last, float(state.get("elapsed", 0.0))
    with stop_signals() as stop, bar(cfg.steps, f"train {job.model_cfg.label}",
                                     enabled=job.progress and w.is_main) as pbar:
        pbar.advance(state["step"])
        for step in range(state["step"], cfg.steps):
            t0 = time.perf_counter()
            x, y = train_stream.batch(step, cfg.batch, length, cfg.seed, rows=w.rows(cfg.batch))
            x, y = x.to(dev), y.to(dev)
            lr = lr_at(step, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr
            with record_kernels() as ran:  # the attention kernel this step actually ran (metrics "kernel")
                loss_value, grad_norm = train_step_stats(model, optimizer, x, y, grad_clip=cfg.grad_clip,
                                                         autocast=autocast, average=w.mean)
            check_loss(loss_value, step, state, run, cfg)
            done = step + 1
            now = time.perf_counter()
            step_seconds, rate, last = now - t0, x.numel() * w.size / max(now - last, 1e-9), now
            evaluate_now = done % cfg.eval_every == 0 or done == cfg.steps
            if evaluate_now or done % cfg.log_every == 0:
                row = {"step": done, "loss": round(loss_value, 6), "lr": lr, "bytes_per_s": round(rate, 1),
                       "grad_norm": round(float(grad_norm), 6), "step_seconds": round(step_seconds, 6),
                       **rate_of(step_seconds), "kernel": kernel_label(ran)}
                if evaluate_now:  # every rank (an FSDP2 forward is collective)
                    row["val_bpb"] = round(validation_bpb(distributed.unwrap(model), valid_stream, cfg, length, dev), 6)
                if run is not None:
                    run.log(row)
                    if job.writer is not None:
                        job.writer.add(row)
            stopping = w.any(stop.requested, dev)
            if done % cfg.save_every == 0 or done == cfg.steps or stopping:
                state = {"step": done, "done": done == cfg.steps, "loss": loss_value,
                         "elapsed": round(elapsed_before + time.perf_counter() - began, 3)}
                whole, whole_optimizer = distributed.full_state(model, optimizer)  # collective under FSDP2
                if run is not None:
                    run.save(whole, whole_optimizer, state)
            if stopping:
                if run is not None:
                    run.finish()  # the session's end and wall seconds, as for a completed one
                raise KeyboardInterrupt(f"stopped by a signal after step {done}, checkpoint written")
            pbar.advance(1, loss=loss_value, bytes_s=rate)
    w.barrier()  # every rank leaves together (rank 0 wrote the last checkpoint)
    summary = {"step": cfg.steps, "loss": loss_value, "elapsed": state.get("elapsed")}
    rows = [r for r in runs.read_metrics(run.path) if "val_bpb" in r] if run is not None else []
    if rows:
        summary["val_bpb"] = rows[-1]["val_bpb"]
    return summary


def check_loss(loss: float, step: int, state: dict, run: runs.RunDir | None, cfg: TrainConfig) -> None:
    """TrainError for a non-finite loss at step index ``step``, saying which checkpoint is kept."""
    if not math.isfinite(loss):
        kept = (f"the last good checkpoint (step {state['step']}) is kept in {run.path}"
                if run is not None and run.has_checkpoint else "no checkpoint was written yet")
        raise TrainError(f"loss is {loss} at step {step + 1}; training stopped, {kept} "
                         f"(a lower --lr may help; it is {cfg.lr:g})")


def throughput(model: GPT, model_cfg: ModelConfig, rows: int, dev: torch.device) -> Callable[[float], dict]:
    """A function of a step's seconds giving ``{"mfu": ...}`` for one rank's ``rows`` windows of
    the training length when the device's peak is known (:mod:`lexkit.provenance`), else ``{}``.
    FLOPs per step = (6·N + 12·L·d·T)·rows·T (:func:`lexkit.provenance.flops_per_token`)."""
    dtype = "bfloat16" if dev.type == "cuda" else "float32"
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


def init_provenance(run_dir: str | Path) -> dict:
    """What ``--init RUN`` started from: the run (its absolute path), its scheme and length, its
    step and the sha256 of its weight file (so the parent can be identified even if it moves)."""
    old = runs.read_config(run_dir)
    weights = Path(run_dir) / runs.WEIGHTS
    if not weights.is_file():
        raise RunError(f"--init {run_dir}: it has no {runs.WEIGHTS} (train it first)")
    state = runs.trainer_state(run_dir) or {}
    return {
        "run": str(Path(run_dir).resolve()), "scheme": old["model"]["scheme"], "train_len": old["model"]["train_len"],
        "step": state.get("step"), "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
    }


callable_module(__name__, train)  # lexkit.train(out, model_cfg, train_cfg, ...)
