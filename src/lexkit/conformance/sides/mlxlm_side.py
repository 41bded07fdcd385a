"""mlx-lm's side (:mod:`protocol`): the rotary module a model gets from
``mlx_lm.models.rope_utils.initialize_rope`` (``nn.RoPE`` for default and linear, ``DynamicNTKScalingRoPE``,
``Llama3RoPE``, ``YarnRoPE``, ``SuScaledRoPE`` for LongRoPE), built as mlx-lm's models build it: r =
``int(head_dim * partial_rotary_factor)`` rotary dims, as bailing_moe.py and qwen3_next.py pass them to
``initialize_rope`` (glm4.py, phi3.py and the others that read the factor compute it so too), not rounded
down to even: an odd r (h 64 at f 0.3 gives 19) is mlx's own error "[rope] dims must be even"; and
called as a model calls it: on [1, H, L, h] with an ``offset``, over the first r dims, rotate-half pairs
(``traditional=False``) unless the config's are interleaved (``traditional=True``). A call at positions P
runs the contiguous block min(P) .. max(P) (so the current length is max(P) + 1, as the harness counts
it) and returns the rows of P; ``tables`` are read off the rotation of x = (1, .., 1, 0, .., 0) (pair i
becomes (a·cos, a·sin)). Runs on Linux with ``pip install mlx mlx-cpu mlx-lm``.
"""

from __future__ import annotations

import numpy as np
import readoff
from hfrope import max_positions, rope_scaling


def info() -> dict:
    import mlx_lm

    return {"name": "mlx-lm", "version": getattr(mlx_lm, "__version__", ""),
            "summary": "rope_utils.initialize_rope: nn.RoPE, DynamicNTKScalingRoPE, Llama3RoPE, YarnRoPE, "
                       "SuScaledRoPE; mx.fast.rope on [1, H, L, h] at an offset"}


def _dtype(name: str):
    import mlx.core as mx

    return {"float32": mx.float32, "bfloat16": mx.bfloat16, "float16": mx.float16}.get(name)


def supports(config: dict) -> str | None:
    if config["scheme"] != "rope":
        return f"no {config['scheme']} in mlx-lm's rope_utils"
    if config["scaling"] == "ntk":
        return "no fixed NTK-aware scaling in mlx-lm (only dynamic)"
    if _dtype(config["dtype"]) is None:
        return f"no {config['dtype']} rope in mlx"
    return None


class Embedding:
    def __init__(self, config: dict) -> None:
        from mlx_lm.models.rope_utils import initialize_rope

        self.c, self.r = config, int(config["head_dim"] * config["fraction"])  # as mlx-lm's models: no rounding
        if config["factor"] is not None and config["factor"] < 1 and config["scaling"] == "none":
            raise ValueError("factor without a scaling")
        traditional = config.get("pairs") == "interleaved"  # mlx's own name for (2i, 2i + 1) pairs
        self.rope = initialize_rope(self.r, config["base"], traditional, rope_scaling(config), max_positions(config))

    def rotate(self, x: np.ndarray, pos: np.ndarray) -> np.ndarray:
        import mlx.core as mx

        start, stop = int(pos.min()), int(pos.max()) + 1
        heads, _, h = x.shape
        block = np.zeros((1, heads, stop - start, h), dtype=np.float32)
        block[0][:, pos - start] = x.astype(np.float32)  # [H, n, h] into the rows of P
        y = self.rope(mx.array(block).astype(_dtype(self.c["dtype"])), offset=start)
        y = np.array(y.astype(mx.float32))
        return y[0][:, pos - start].astype(np.float64)

    def tables(self, pos: np.ndarray):
        return readoff.tables(self.rotate, pos, self.c["head_dim"], self.r, self.c.get("pairs") == "interleaved")


def build(config: dict) -> Embedding:
    return Embedding(config)


# -- whole models (lexkit conformance --models) ----------------------------------------------------
class Model:
    """A checkpoint as mlx-lm loads it (``mlx_lm.utils.load_model(Path(dir))``, float32 weights kept as
    saved) and runs it: ``model(mx.array([ids]))`` for every position's logits; decoding through
    ``mlx_lm.models.cache.make_prompt_cache(model)`` (its KV caches, a RotatingKVCache on a windowed
    layer), the prefill one call, then ``step`` tokens a call."""

    def __init__(self, directory: str) -> None:
        from pathlib import Path

        from mlx_lm.utils import load_model

        self.model, self.config = load_model(Path(directory))

    def _logits(self, ids, cache=None) -> np.ndarray:
        import mlx.core as mx

        out = self.model(mx.array(np.asarray(ids)[None]), cache=cache)
        return np.array(out[0].astype(mx.float32))

    def prefill(self, ids: np.ndarray) -> np.ndarray:
        return self._logits(ids)

    def batch(self, seqs: list) -> list:
        """The sequences right-padded (with 0) into one ``model(mx.array([...]))`` call, as a user batches
        prompts of different lengths: under causal attention a row's logits at its real positions do not see
        the padding after them, so no mask is needed; each row's real positions are returned."""
        import mlx.core as mx

        n = max(len(ids) for ids in seqs)
        block = np.zeros((len(seqs), n), dtype=np.int64)
        for b, ids in enumerate(seqs):
            block[b, : len(ids)] = ids
        out = np.array(self.model(mx.array(block)).astype(mx.float32))
        return [out[b, : len(ids)] for b, ids in enumerate(seqs)]

    def read(self) -> dict:
        """What mlx-lm's ModelArgs hold of positions and windows (the fields it read from config.json)."""
        args = getattr(self.model, "args", None)
        fields = vars(args) if args is not None else {}
        return {k: v for k, v in fields.items() if any(w in k for w in ("rope", "window", "layer_types", "sink"))}

    def decode(self, ids: np.ndarray, start: int, step: int) -> np.ndarray:
        from mlx_lm.models.cache import make_prompt_cache

        cache = make_prompt_cache(self.model)
        self._logits(ids[:start], cache)
        return np.concatenate([self._logits(ids[at:at + step], cache) for at in range(start, len(ids), step)])


def model_supports(case: dict) -> str | None:
    from mlx_lm.utils import _get_classes

    try:
        _get_classes(case["config"])
    except Exception as exc:  # mlx-lm has no such model type
        return f"mlx-lm has no model type {case['model_type']!r} ({type(exc).__name__}: {str(exc)[:80]})"
    return None


def load_model(directory: str, case: dict) -> Model:
    return Model(directory)
