"""Training: AdamW, linear warmup then cosine decay, gradient clipping; checkpoints and resume.

The learning rate at step t of a run with ``steps`` total is
``lr·t/warmup`` for t < warmup, then ``lr·(r + (1 - r)·(1 + cos(π·u))/2)`` with
``u = (t - warmup)/(steps - warmup)`` and r = ``min_lr_ratio``. It depends only on (t, steps):
resuming with a larger ``--steps`` keeps every step already taken and follows the longer cosine
from the resume point on (so the rate rises at that point to its value under the new total).

Batch t is drawn from a generator seeded by (seed, t) alone, and the checkpoint keeps the
optimizer and RNG state, so on CPU a killed and resumed run ends with the same weights, byte for
byte, as an uninterrupted one.

Under ``torchrun`` the same loop runs on every rank (:mod:`lexkit.distributed`): rank r trains on
its contiguous share of every global batch through DistributedDataParallel (or FSDP2 with
``fsdp=True``); rank 0 alone checks, locks and writes the run directory, and checkpoints hold
whole tensors either way.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F

from . import checks, distributed, lock, presets, runs
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
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{key} must be a positive integer, got {value}")
            checks.number(key, value)
        checks.number("warmup", self.warmup, strict=False)
        if not (isinstance(self.lr, (int, float)) and self.lr > 0):
            raise ValueError(f"lr must be positive, got {self.lr}")
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
    from .specs import split_spec

    old = runs.read_config(run_dir, training=True)
    values = {**old["model"], **old["train"]}
    values.update({k: v for k, v in overrides.items() if v is not None})
    spec = scheme if scheme is not None else old["model"]["scheme"]
    length = old["model"].get("max_len") or old["model"]["train_len"]
    head_dim = int(values["d_model"]) // int(values["n_heads"])
    probe = positions.create(spec, n_heads=1, head_dim=head_dim, max_len=length)  # which fills it keeps
    given = {item.partition("=")[0].strip() for item in split_spec(spec)[1]}
    pinned = [f"{key}={length}" for key in probe.train_len_params
              if key not in given and probe.values.get(key) is not None]
    if pinned:
        spec = spec + ("," if ":" in spec else ":") + ",".join(pinned)
    values.pop("scheme", None)
    return split_settings(spec, values)


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
    position scheme's own parameters (``scheme.*``: KERPLE's slopes, T5's table)."""
    def decays(name: str, p: torch.Tensor) -> bool:
        return p.dim() >= 2 and not name.startswith("scheme.")

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
    with autocast if autocast is not None else nullcontext():
        logits = model(x)  # [batch, length, vocab]
    loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
    value = (average(loss.detach()) if average is not None else loss).item()
    if not math.isfinite(value):
        return value
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    core = distributed.unwrap(model)
    if isinstance(core, GPT):
        core.scheme.constrain_()
    return value


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
) -> dict:
    """Train (or resume) a run in ``out``; returns a summary (steps, final loss, validation bpb).

    Every check that needs no write (settings, device, corpus, window length) runs before the
    directory is created or touched; then ``out`` is locked (one writer) for the whole run.
    ``train_cfg.data`` on resume may name the run's corpus at a new place: it is accepted when
    its fingerprint is the recorded one, and recorded from then on.

    ``world``: the ranks to train over; by default torchrun's (:func:`lexkit.distributed.setup`;
    one process without torchrun). ``fsdp``: shard parameters and optimizer state over them.

    ``init``: start from the weights of that trained run (a fresh optimizer and schedule), the
    short fine-tune of context extension (:func:`configs_from_run`); its provenance (run, scheme,
    training length, step, weight file digest) is written to ``config.json`` under ``"init"``.
    """
    out = Path(out)
    w, dev = distributed.setup(device) if world is None else (world, distributed.rank_device(device, world))
    if threads is not None:
        checks.number("threads", threads, maximum=4096)
        torch.set_num_threads(threads)
    check_model(model_cfg)
    check_mix(train_cfg.mix, model_cfg.train_len)
    w.check_batch(train_cfg.batch)
    if fsdp and not w.parallel:
        raise ValueError("--fsdp shards over processes: start with torchrun --nproc_per_node N (N > 1)")
    train_cfg, old, moved = w.on_main(lambda: _check(out, train_cfg, resume, corpus))
    corpus = _corpus(corpus, lambda: run_corpus(old, out, train_cfg.data if moved else None) if resume
                     else load_corpus(train_cfg.data), w)

    torch.manual_seed(train_cfg.seed)
    model = GPT(model_cfg).to(dev)
    optimizer = make_optimizer(model, train_cfg)
    held: list[int] = []  # rank 0's lock on ``out``, taken in _prepare, held to the end
    try:
        state = w.on_main(lambda: _prepare(out, model_cfg, train_cfg, corpus, old, moved, model, optimizer, held,
                                           init))
        start = state["step"]
        if state.get("done") and start >= train_cfg.steps:
            if progress and w.is_main:
                print(f"{out}: already finished ({start} steps); nothing to do")
            return state
        model, optimizer = _spread(model, optimizer, train_cfg, w, dev, fsdp)
        train_stream, valid_stream = _streams(corpus, train_cfg, model_cfg.train_len, w)
        return _loop(out, model, optimizer, model_cfg, train_cfg, state, train_stream, valid_stream, w, dev,
                     progress)
    finally:
        for fd in held:
            lock.release(out, fd)


def _check(
    out: Path, train_cfg: TrainConfig, resume: bool, corpus: Corpus | None
) -> tuple[TrainConfig, dict | None, bool]:
    """Before anything is written: the directory is a run to resume, or new and writable. Returns
    the settings with the corpus path made absolute, the stored config (on resume) and whether
    the corpus moved (a new ``--data`` on resume)."""
    if resume:
        old = runs.read_config(out, training=True)
        moved = train_cfg.data != old["train"]["data"]
        if moved and corpus is None:
            train_cfg = dataclasses.replace(train_cfg, data=absolute_spec(train_cfg.data))
        return train_cfg, old, moved
    _check_new(out)
    if corpus is None:
        train_cfg = dataclasses.replace(train_cfg, data=absolute_spec(train_cfg.data))
    return train_cfg, None, False


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


def _check_new(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise RunError(f"{out} exists and is not a directory; give a new --out")
    if out.is_dir() and any(p.name != lock.LOCK for p in out.iterdir()):
        raise RunError(f"{out} exists and is not empty; use --resume to continue it, or another --out")
    parent = out if out.is_dir() else next((p for p in out.absolute().parents if p.exists()), None)
    if parent is not None and not os.access(parent, os.W_OK):
        raise RunError(f"--out {out}: {parent} is not writable")


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


def _prepare(out: Path, model_cfg: ModelConfig, train_cfg: TrainConfig, corpus: Corpus, old: dict | None,
             moved: bool, model: GPT, optimizer: torch.optim.Optimizer, held: list[int],
             init: str | Path | None = None) -> dict:
    """Rank 0's part: the remaining checks (settings against the stored run, the window length),
    then the lock on ``out`` (appended to ``held``), the weights of ``init`` (a new run) or the
    checkpoint (on resume), and config.json; returns the trainer state to start from (the other
    ranks get rank 0's weights in :func:`_spread`)."""
    resume = old is not None
    new = run_config(model_cfg, train_cfg, corpus)
    if resume:
        _check_resume(out, old, new, train_cfg, corpus, moved)
        if "init" in old:
            new["init"] = old["init"]
    elif init is not None:
        new["init"] = init_provenance(init)
    tokens = sum(len(d) + 1 for d in corpus.train)  # BOS before every document
    if tokens < model_cfg.train_len + 1:
        raise DataError(f"--train-len {model_cfg.train_len}: the training split of {corpus.spec!r} has "
                        f"{tokens:,} tokens, fewer than one window of {model_cfg.train_len + 1}")
    held.append(lock.take(out))
    if not resume:
        _check_new(out)  # again, under the lock: another writer may have started meanwhile
    elif runs.read_config(out, training=True) != old:
        raise RunError(f"{out} changed while this command started; try again")
    start, state = 0, {"step": 0, "done": False}
    if init is not None and not resume:
        runs.load_weights(init, model, recorded=runs.read_config(init)["model"])
    if resume and (out / runs.CHECKPOINT).is_file():
        state = runs.load_checkpoint(out, model, optimizer)
        start = state["step"]
        if state.get("done") and start >= train_cfg.steps:
            return state
    if resume:
        _truncate_metrics(out, start)
    runs.write_json(out / runs.CONFIG, new)
    return state


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


def _loop(out: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, model_cfg: ModelConfig,
          train_cfg: TrainConfig, state: dict, train_stream: Stream, valid_stream: Stream,
          w: distributed.World, dev: torch.device, progress: bool) -> dict:
    start = state["step"]
    length = model_cfg.train_len
    autocast = device_autocast(dev)
    model.train()
    log = open(out / runs.METRICS, "a") if w.is_main else None
    loss_value, last = float("nan"), time.perf_counter()
    began, elapsed_before = last, float(state.get("elapsed", 0.0))
    try:
        with bar(train_cfg.steps, f"train {model_cfg.scheme}", enabled=progress and w.is_main) as pbar:
            pbar.advance(start)
            for step in range(start, train_cfg.steps):
                x, y = train_stream.batch(step, train_cfg.batch, length, train_cfg.seed, rows=w.rows(train_cfg.batch))
                x, y = x.to(dev), y.to(dev)
                lr = lr_at(step, train_cfg)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                loss_value = train_step(model, optimizer, x, y, grad_clip=train_cfg.grad_clip, autocast=autocast,
                                        average=w.mean)
                if not math.isfinite(loss_value):
                    kept = (f"the last good checkpoint (step {state['step']}) is kept in {out}"
                            if (out / runs.CHECKPOINT).is_file() else "no checkpoint was written yet")
                    raise TrainError(f"loss is {loss_value} at step {step + 1}; training stopped, {kept} "
                                     f"(a lower --lr may help; it is {train_cfg.lr:g})")
                done = step + 1
                now = time.perf_counter()
                rate = x.numel() * w.size / max(now - last, 1e-9)
                last = now
                last_step = done == train_cfg.steps
                evaluate_now = done % train_cfg.eval_every == 0 or last_step
                if evaluate_now or done % train_cfg.log_every == 0:
                    row = {"step": done, "loss": round(loss_value, 6), "lr": lr, "bytes_per_s": round(rate, 1)}
                    if evaluate_now:  # every rank (an FSDP2 forward is collective)
                        bpb = validation_bpb(distributed.unwrap(model), valid_stream, train_cfg, length, dev)
                        row["val_bpb"] = round(bpb, 6)
                    if log is not None:
                        log.write(checks.strict_json(row) + "\n")
                        log.flush()
                if done % train_cfg.save_every == 0 or done == train_cfg.steps:
                    state = {"step": done, "done": done == train_cfg.steps, "loss": loss_value,
                             "elapsed": round(elapsed_before + time.perf_counter() - began, 3)}
                    whole, whole_optimizer = distributed.full_state(model, optimizer)  # collective under FSDP2
                    if w.is_main:
                        runs.save_checkpoint(out, whole, whole_optimizer, state)
                        runs.save_weights(out, whole)
                pbar.advance(1, loss=loss_value, bytes_s=rate)
    finally:
        if log is not None:
            log.close()
    w.barrier()  # every rank leaves together (rank 0 wrote the last checkpoint)
    summary = {"step": train_cfg.steps, "loss": loss_value, "elapsed": state.get("elapsed")}
    rows = [r for r in runs.read_metrics(out) if "val_bpb" in r] if w.is_main else []
    if rows:
        summary["val_bpb"] = rows[-1]["val_bpb"]
    return summary


def init_provenance(run_dir: str | Path) -> dict:
    """What ``--init RUN`` started from: the run, its scheme and length, its step and the sha256
    of its weight file (so the parent can be identified even if the directory moves)."""
    import hashlib

    old = runs.read_config(run_dir)
    weights = Path(run_dir) / runs.WEIGHTS
    if not weights.is_file():
        raise RunError(f"--init {run_dir}: it has no {runs.WEIGHTS} (train it first)")
    state = runs.trainer_state(run_dir) or {}
    return {
        "run": str(run_dir), "scheme": old["model"]["scheme"], "train_len": old["model"]["train_len"],
        "step": state.get("step"), "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
    }


def _truncate_metrics(out: Path, step: int) -> None:
    """Drop metric rows past the checkpoint we resume from (they will be logged again)."""
    rows = [r for r in runs.read_metrics(out) if r.get("step", 0) <= step]
    runs.atomic_write(out / runs.METRICS, "".join(checks.strict_json(r) + "\n" for r in rows))

