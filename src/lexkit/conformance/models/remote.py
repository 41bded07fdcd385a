"""Whole models of a runtime that runs in its own interpreter (mlx-lm, vLLM, llama.cpp's bindings): the
side module answers the model operations of the protocol (``sides/protocol.py``: ``model_supports``,
``load``, ``prefill``, ``decode``; logits as base64 float32), over the same trustworthy pipe as the
table checks (:class:`lexkit.conformance.remote.Side`: numbered answers, fd 1 the protocol's, stderr
drained, a timeout a request)."""

from __future__ import annotations

from pathlib import Path

import torch

from .. import remote
from ..adapters.mlxlm import MlxLm
from ..remote import RemoteAdapter, Side
from ..sides.protocol import unpack
from .cases import ModelCase
from .runtime import register


def case_json(case: ModelCase) -> dict:
    """A model case as the protocol sends it."""
    return {"name": case.name, "model_type": case.model_type, "config": case.hf_config, "original": case.original,
            "window": case.window}


def _tensor(data: dict) -> torch.Tensor:
    """Logits as the protocol packs them (:func:`~lexkit.conformance.sides.protocol.pack`), as a tensor."""
    return torch.from_numpy(unpack(data).copy())


class _Model:
    """A model loaded in the other interpreter; ``batch`` and ``read`` where the side's model offers them."""

    def __init__(self, side: Side, directory: Path, case: ModelCase) -> None:
        self.side = side
        reply = side.ask({"op": "load", "directory": str(directory), "case": case_json(case)})
        self.id = reply["id"]
        for method in reply.get("offers", ()):
            setattr(self, method, getattr(self, f"_{method}"))

    def prefill(self, ids):
        return _tensor(self.side.ask({"op": "prefill", "id": self.id, "ids": torch.as_tensor(ids).tolist()})["logits"])

    def _read(self) -> dict | None:
        return self.side.ask({"op": "read", "id": self.id})["read"]

    def _batch(self, seqs):
        reply = self.side.ask({"op": "batch", "id": self.id, "seqs": [torch.as_tensor(s).tolist() for s in seqs]})
        return [_tensor(rows) for rows in reply["logits"]]

    def decode(self, ids, start: int, step: int):
        reply = self.side.ask({"op": "decode", "id": self.id, "ids": torch.as_tensor(ids).tolist(), "start": start,
                               "step": step})
        return _tensor(reply["logits"])


class RemoteModelRuntime(RemoteAdapter):
    """A runtime's whole models through its ``side`` module in ``python`` (its own environment)."""

    def supports(self, case: ModelCase) -> str | None:  # type: ignore[override]
        return self._connect().ask({"op": "model_supports", "case": case_json(case)})["reason"]

    def load(self, directory: Path, case: ModelCase) -> object:
        return _Model(self._connect(), directory, case)


@register
class MlxLmModels(RemoteModelRuntime):
    name = "mlx-lm"
    side = "mlxlm_side"
    probe = "mlx_lm"
    install = MlxLm.install
    summary = ("mlx_lm.utils.load_model(dir) as saved (float32), model(mx.array([ids])) for every position, "
               "make_prompt_cache's caches for decode; out of process")


def elsewhere(name: str, python: str) -> RemoteModelRuntime:
    """lexkit's in-process model runtime ``name`` (transformers) run in the interpreter ``python``, an
    environment with lexkit and another release of the runtime, through the lexkit side."""
    from .runtime import MODEL_RUNTIMES

    return remote.elsewhere(name, python, MODEL_RUNTIMES, RemoteModelRuntime)
