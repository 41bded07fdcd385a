"""Running under ``torchrun``: who this process is, its device, the process group, its share of a
batch, rank-0-only input and output, and errors that end every rank with one message.

``torchrun`` (or SLURM through it) sets ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``; a process
started without them is the one-rank :data:`SINGLE` world and every helper here is a no-op, so the
trainer has one code path.

* Batch: the trainer draws the *global* batch t from a generator seeded by (seed, t) exactly as one
  process does; rank r keeps the contiguous rows ``[r·B/N, (r+1)·B/N)`` (:meth:`World.rows`).
  The loss is a mean over tokens, and DDP averages gradients over ranks, so the step equals the
  one-process step (up to float32 reduction order) only when every rank holds B/N rows: ``B`` must
  divide by ``N`` (:meth:`World.check_batch`).
* Devices: ``cuda:LOCAL_RANK`` with NCCL on a GPU machine, the CPU with gloo otherwise.
* Corpus: loaded by one rank per node and checked the same everywhere (:func:`node_corpus`); one copy
  of the training token stream per *node*, not per rank: local rank 0 writes it to a shared-memory
  file that every rank of the node maps (:func:`shared_tokens`); the validation windows are rank 0's
  (:func:`streams`).
* The model: rank 0's weights, optimizer and RNG state on every rank, then DDP or FSDP2
  (:func:`spread`).
* Errors: a check whose outcome may differ between ranks goes through :meth:`World.agree` (every
  rank runs it; a failure anywhere raises the same :class:`RankError` everywhere); one only rank 0
  can make (the run directory) goes through :meth:`World.on_main`. The CLI prints user errors on
  rank 0 only (:func:`reports`), so a failing job says one ``error: ...`` line; where no
  collective joins the ranks (a study's cells) a rank's own failure is a :class:`LocalError`,
  which that rank prints, named.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from ..core.device import resolve_device
from ..core.errors import LexkitError
from ..data.corpus import Corpus, Stream, tokens_of
from ..data.mix import MixedStream

T = TypeVar("T")

#: what a collective check passes between ranks: errors a user can cause
USER_ERRORS = (LexkitError, ValueError, OSError)


class RankError(LexkitError, ValueError):
    """A failure on one rank, raised with the same message on every rank."""


class LocalError(LexkitError, ValueError):
    """A failure on this rank alone, with no collective to carry it to rank 0 (a study's cell):
    printed by the rank it happened on."""


@dataclasses.dataclass(frozen=True)
class World:
    """This process's place in the job: ``rank`` of ``size`` processes, ``local_rank`` on its node."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def parallel(self) -> bool:
        return self.size > 1

    # -- batches ------------------------------------------------------------------------------
    def check_batch(self, batch: int) -> None:
        if batch % self.size:
            raise ValueError(
                f"--batch {batch} (the global batch) does not divide by the world size {self.size}; "
                f"use a multiple of {self.size}, e.g. {max(self.size, batch // self.size * self.size)}"
            )

    def rows(self, batch: int) -> slice:
        """This rank's contiguous rows of a global batch of ``batch`` rows."""
        share = batch // self.size
        return slice(self.rank * share, (self.rank + 1) * share)

    # -- collectives (no-ops in one process) --------------------------------------------------
    def mean(self, value: torch.Tensor) -> torch.Tensor:
        """The mean of a tensor over ranks (a copy; every rank gets the same value)."""
        if not self.parallel:
            return value
        import torch.distributed as dist

        out = value.detach().clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out / self.size

    def any(self, flag: bool, device: torch.device | str = "cpu") -> bool:
        """Whether ``flag`` is true on any rank (a stop signal seen by one rank stops all at the
        same step); ``device``: where the collective's tensor lives (this rank's, for NCCL)."""
        if not self.parallel:
            return flag
        return bool(self.mean(torch.tensor(float(flag), device=device)).item() > 0)

    def barrier(self) -> None:
        if self.parallel:
            import torch.distributed as dist

            dist.barrier()

    def broadcast(self, obj: T) -> T:
        """Rank 0's ``obj`` on every rank (small Python objects: trainer state, optimizer state)."""
        if not self.parallel:
            return obj
        import torch.distributed as dist

        box = [obj if self.is_main else None]
        dist.broadcast_object_list(box, 0)
        return box[0]

    def gather(self, obj: Any) -> list:
        """Every rank's ``obj``, in rank order, on every rank."""
        if not self.parallel:
            return [obj]
        import torch.distributed as dist

        out: list = [None] * self.size
        dist.all_gather_object(out, obj)
        return out

    def agree(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on every rank; if it fails with a user error on any rank, raise that error
        (the lowest failing rank's, named) on every rank."""
        try:
            value, failure = fn(), None
        except USER_ERRORS as exc:
            if not self.parallel:
                raise
            value, failure = None, str(exc)
        failures = self.gather(failure)
        for rank, message in enumerate(failures):
            if message is not None:
                raise RankError(f"rank {rank}: {message}" if rank else message)
        return value

    def on_main(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on rank 0 only and hand its result to every rank; a user error there is
        raised on every rank."""
        if not self.parallel:
            return fn()
        outcome: tuple[str, Any] | None = None
        if self.is_main:
            try:
                outcome = ("ok", fn())
            except USER_ERRORS as exc:
                outcome = ("error", str(exc))
        outcome = self.broadcast(outcome)
        if outcome[0] == "error":
            raise RankError(outcome[1])
        return outcome[1]


SINGLE = World()


def world() -> World:
    """This process's world from torchrun's environment (``SINGLE`` without it)."""
    def read(name: str, default: int) -> int:
        value = os.environ.get(name)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError as exc:
            raise ValueError(f"environment variable {name}={value!r} is not an integer") from exc

    size = read("WORLD_SIZE", 1)
    rank = read("RANK", 0)
    if size < 1 or not 0 <= rank < size:
        raise ValueError(f"RANK={rank} / WORLD_SIZE={size} from the environment are inconsistent")
    return World(rank=rank, size=size, local_rank=read("LOCAL_RANK", 0))


def rank_device(device: str, w: World) -> torch.device:
    """The device of this rank: ``auto`` and ``cuda`` mean ``cuda:LOCAL_RANK`` when ranks share
    a node's GPUs; anything else as :func:`~lexkit.core.device.resolve_device` reads it."""
    dev = resolve_device(device)
    if dev.type == "cuda" and dev.index is None and w.parallel:
        count = torch.cuda.device_count()
        if w.local_rank >= count:
            raise ValueError(f"local rank {w.local_rank} has no GPU (this node has {count}); "
                             f"start at most {count} processes per node (--nproc_per_node)")
        dev = torch.device("cuda", w.local_rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    return dev


def setup(device: str = "auto") -> tuple[World, torch.device]:
    """This process's world and device; joins the process group (NCCL on CUDA, gloo on the CPU)
    the first time it is called under torchrun. The group is left at exit."""
    w = world()
    dev = rank_device(device, w)
    if w.parallel:
        import torch.distributed as dist

        if not dist.is_initialized():
            backend = "nccl" if dev.type == "cuda" else "gloo"
            dist.init_process_group(backend, device_id=dev if dev.type == "cuda" else None)
            atexit.register(_leave)
    return w, dev


def _leave() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def reports(exc: BaseException) -> bool:
    """Whether this process prints the CLI's one line for a user error: rank 0 does (errors that
    can differ between ranks reach rank 0 through :meth:`World.agree`), and a :class:`LocalError`
    is printed by its own rank."""
    try:
        rank = world().rank
    except ValueError:
        rank = 0
    return rank == 0 or isinstance(exc, LocalError)


# -- the model across ranks ----------------------------------------------------------------------
def wrap(model: nn.Module, w: World, dev: torch.device, *, fsdp: bool = False) -> nn.Module:
    """``model`` for training on ``w``: itself in one process; DistributedDataParallel (gradients
    averaged over ranks in backward); or, with ``fsdp``, FSDP2 ``fully_shard`` on every block and
    then the root (parameters, gradients and optimizer state sharded over ranks; the tied
    embedding/head stays in the root's group). Every rank must hold the same weights first
    (:func:`sync_from_main`). Build the optimizer on the returned module's parameters."""
    if fsdp and not w.parallel:
        raise ValueError("--fsdp shards over processes: start with torchrun --nproc_per_node N (N > 1)")
    if not w.parallel:
        return model
    if fsdp:
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside a DDP wrapper (itself otherwise; an FSDP2 model is its own module)."""
    from torch.nn.parallel import DistributedDataParallel

    return model.module if isinstance(model, DistributedDataParallel) else model


def sync_from_main(model: nn.Module, w: World) -> None:
    """Copy rank 0's parameters and buffers to every rank (before wrapping)."""
    if not w.parallel:
        return
    import torch.distributed as dist

    for tensor in model.state_dict().values():
        dist.broadcast(tensor, 0)


def _full(value: Any) -> Any:
    from torch.distributed.tensor import DTensor

    return value.full_tensor() if isinstance(value, DTensor) else value


class _Snapshot:
    """A gathered state dict behind a ``state_dict()`` method, with the model's ``cfg`` (what
    :mod:`lexkit.training.runs` saves: the weights and the config recorded beside them)."""

    def __init__(self, state: dict, cfg: Any = None) -> None:
        self._state, self.cfg = state, cfg

    def state_dict(self) -> dict:
        return self._state


def full_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[Any, Any]:
    """(model, optimizer) whose ``state_dict()`` holds plain, whole tensors, for
    :func:`lexkit.training.runs.save_checkpoint`: the modules themselves unless FSDP2 sharded them, else
    snapshots gathered from every rank (a collective: call it on every rank)."""
    model = unwrap(model)
    from torch.distributed.tensor import DTensor

    if not any(isinstance(p, DTensor) for p in model.parameters()):
        return model, optimizer
    weights = {k: _full(v) for k, v in model.state_dict().items()}
    opt = optimizer.state_dict()
    opt = {"state": {i: {k: _full(v) for k, v in slots.items()} for i, slots in opt["state"].items()},
           "param_groups": opt["param_groups"]}
    return _Snapshot(weights, getattr(model, "cfg", None)), _Snapshot(opt)


def load_optimizer(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Load a whole-tensor optimizer state dict into an optimizer over (possibly FSDP2-sharded)
    parameters: each slot shaped like its parameter is cut to this rank's shard."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    params = [p for group in optimizer.param_groups for p in group["params"]]
    slots = {}
    for index, values in state["state"].items():
        p = params[int(index)]
        slots[index] = {
            k: distribute_tensor(v.to(p.device), p.device_mesh, p.placements, src_data_rank=None)
            if isinstance(p, DTensor) and isinstance(v, torch.Tensor) and v.shape == p.shape else v
            for k, v in values.items()
        }
    optimizer.load_state_dict({"state": slots, "param_groups": state["param_groups"]})


def spread(model: nn.Module, optimizer: torch.optim.Optimizer, w: World, dev: torch.device, *, fsdp: bool,
           rebuild: Callable[[nn.Module], torch.optim.Optimizer]) -> tuple[nn.Module, torch.optim.Optimizer]:
    """Rank 0's weights, optimizer and RNG state on every rank; the model wrapped for DDP or
    sharded by FSDP2, its optimizer then ``rebuild(model)`` over the shards. In one process:
    both as they are."""
    if not w.parallel:
        return model, optimizer
    sync_from_main(model, w)
    opt_state = w.broadcast(optimizer.state_dict() if w.is_main else None)
    torch.set_rng_state(w.broadcast(torch.get_rng_state()))
    model = wrap(model, w, dev, fsdp=fsdp)
    if fsdp:
        optimizer = rebuild(model)
        load_optimizer(optimizer, opt_state)
    elif not w.is_main:
        optimizer.load_state_dict(opt_state)
    return model, optimizer


# -- the corpus, once per node --------------------------------------------------------------------
def node_corpus(corpus: Corpus | None, load: Callable[[], Corpus], w: World) -> Corpus | None:
    """The corpus (``load()`` when not given), loaded by one rank per node under torchrun (None on
    the others), the same (by fingerprint) on every node."""
    if corpus is None and w.local_rank == 0:
        corpus = w.agree(load)
    elif w.parallel:
        w.agree(lambda: None)  # the loading ranks' collective
    prints = w.gather(corpus.fingerprint if corpus is not None else None)
    for rank, fingerprint in enumerate(prints):
        if fingerprint is not None and fingerprint != prints[0]:
            raise RankError(f"rank {rank} reads a different corpus than rank 0 ({fingerprint} != {prints[0]}); "
                            "every node needs the same data")
    return corpus


def streams(corpus: Corpus | None, mix: str, windows: int, length: int, w: World,
            curriculum: int = 0) -> tuple[Stream, Stream]:
    """The training stream (one copy per node; retrieval documents in it when ``mix`` names some,
    drawn by the curriculum's rule before step ``curriculum``) and the validation stream (rank 0's
    first ``windows`` windows of ``length``, handed to every rank)."""
    key = w.broadcast(hashlib.sha256(json.dumps(corpus.fingerprint, sort_keys=True).encode()).hexdigest()[:16]
                      if w.is_main else None)
    train_stream = Stream(tokens=shared_tokens(lambda: tokens_of(corpus.train), key, w))
    if mix:
        train_stream = MixedStream(train_stream.tokens, mix, curriculum)
    if not w.parallel:
        return train_stream, Stream(corpus.valid)
    head = Stream(corpus.valid).tokens[: windows * length + 1] if w.is_main else None
    return train_stream, Stream(tokens=w.broadcast(head))


def shared_tokens(build: Callable[[], torch.Tensor], key: str, w: World) -> torch.Tensor:
    """A 1-D int16 token tensor built once per node: local rank 0 calls ``build`` and writes the
    result to a shared-memory file named by ``key`` and the node's torchrun agent; every rank of the
    node maps that file (one copy in memory, read-only pages shared), and the file is removed as
    soon as all ranks hold it. In one process: ``build()``."""
    if not w.parallel:
        return build()
    folder = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    path = folder / f"lexkit-{os.getppid()}-{key}.int16"
    count = None
    if w.local_rank == 0:
        tokens = build().to(torch.int16).contiguous()
        path.write_bytes(tokens.numpy().tobytes())
        count = tokens.numel()
        del tokens
    counts = w.gather(count)  # also the barrier: every node's file is written
    count = next(c for r, c in enumerate(counts) if c is not None and _same_node(r, w))
    tokens = w.agree(lambda: torch.from_file(str(path), shared=False, size=count, dtype=torch.int16))
    w.barrier()
    if w.local_rank == 0:
        path.unlink(missing_ok=True)
    return tokens


def _same_node(rank: int, w: World) -> bool:
    """Whether ``rank`` is the local rank 0 of this rank's node (torchrun numbers ranks node by
    node, ``LOCAL_WORLD_SIZE`` per node)."""
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", w.size))
    return rank == (w.rank // per_node) * per_node
