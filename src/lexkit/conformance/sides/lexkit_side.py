"""Any of lexkit's in-process adapters run in another interpreter (:mod:`protocol`): that environment
has lexkit and its own release of the runtime (``lexkit conformance --matrix transformers==5.0.0``
runs the ``transformers`` adapter in a virtualenv per release). The adapter is named by the
``LEXKIT_SIDE_ADAPTER`` environment variable; configs arrive as JSON and are rebuilt as
:class:`lexkit.conformance.RopeConfig`, arrays go back as lists."""

from __future__ import annotations

import math
import os

NAME = os.environ.get("LEXKIT_SIDE_ADAPTER", "")


def _adapter():
    from lexkit import conformance

    return conformance.adapter(NAME)


def config_of(data: dict):
    """The RopeConfig a JSON config describes (the inverse of lexkit.conformance.remote.config_json)."""
    import torch

    from lexkit.conformance import RopeConfig

    values = dict(data)
    values["dtype"] = getattr(torch, values["dtype"])
    values["leak"] = math.inf if values.get("leak") is None else values["leak"]
    values["layers"] = tuple((name, config_of(c)) for name, c in values.get("layers", ()))
    for key in ("short_factor", "long_factor"):
        if values.get(key) is not None:
            values[key] = tuple(values[key])
    return RopeConfig(**values)


def info() -> dict:
    adapter = _adapter()
    reason = adapter.unavailable()
    if reason:
        raise RuntimeError(reason)
    return {"name": adapter.name, "version": adapter.version(), "summary": adapter.summary}


def supports(config: dict) -> str | None:
    return _adapter().supports(config_of(config))


class _Numpy:
    """The adapter's embedding, its torch answers as numpy arrays (and numpy inputs as tensors): every
    check it offers (lexkit.conformance.adapter.CHECKS), so the verdicts here are the in-process ones."""

    def __init__(self, embedding, dtype) -> None:
        from lexkit.conformance.adapter import CHECKS

        self.embedding, self.dtype = embedding, dtype
        for check in CHECKS:
            if hasattr(embedding, check):
                setattr(self, check, getattr(self, f"_{check}"))

    @staticmethod
    def _pos(pos):
        import torch

        return torch.as_tensor(pos, dtype=torch.long)

    def _frequencies(self, pos):
        inv, a = self.embedding.frequencies(self._pos(pos))
        return inv.double().numpy(), float(a)

    def _tables(self, pos):
        cos, sin = self.embedding.tables(self._pos(pos))
        return cos.double().numpy(), sin.double().numpy()

    def _rotate(self, x, pos, check: str = "rotate"):
        import torch

        y = getattr(self.embedding, check)(torch.as_tensor(x).to(self.dtype), self._pos(pos))
        return y.double().numpy()

    def _rotate_batch(self, x, pos):
        return self._rotate(x, pos, "rotate_batch")

    def _scores(self, q, k, pos):
        import torch

        s = self.embedding.scores(torch.as_tensor(q).to(self.dtype), torch.as_tensor(k).to(self.dtype),
                                  self._pos(pos))
        return s.double().numpy()


def build(config: dict):
    cfg = config_of(config)
    return _Numpy(_adapter().build(cfg), cfg.dtype)


# -- whole models: an in-process model runtime (transformers) run here (lexkit conformance --models --matrix) --
def _model_runtime():
    from lexkit.conformance import models

    return models.MODEL_RUNTIMES.get(NAME)()


def _model_case(case: dict):
    """The battery's case of that name (its checkpoint's config is what the runtime reads anyway)."""
    from lexkit.conformance import models
    from lexkit.conformance.models.cases import ModelCase

    known = {c.name: c for c in models.CASES}
    return known.get(case["name"]) or ModelCase(case["name"], case["model_type"], original=case["original"])


def model_supports(case: dict) -> str | None:
    return _model_runtime().supports(_model_case(case))


def load_model(directory: str, case: dict):
    from pathlib import Path

    return _model_runtime().load(Path(directory), _model_case(case))
