"""mlx-lm's side (:mod:`protocol`): the rotary module a model gets from
``mlx_lm.models.rope_utils.initialize_rope`` (``nn.RoPE`` for default and linear, ``DynamicNTKScalingRoPE``,
``Llama3RoPE``, ``YarnRoPE``, ``SuScaledRoPE`` for LongRoPE), called as a model calls it: on
[1, H, L, h] with an ``offset``, rotate-half pairs (``traditional=False``) over the first r dims. A call
at positions P runs the contiguous block min(P) .. max(P) (so the current length is max(P) + 1, as the
harness counts it) and returns the rows of P; ``tables`` are read off the rotation of x = (1, .., 1,
0, .., 0) (pair i becomes (a·cos, a·sin)). Runs on Linux with ``pip install mlx mlx-cpu mlx-lm``.
"""

from __future__ import annotations

import numpy as np


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


def scaling_config(c: dict) -> dict | None:
    """The ``rope_scaling`` dict of an HF config, as mlx-lm's models hand it to initialize_rope."""
    if c["scaling"] == "none":
        return None
    out = {"rope_type": c["scaling"], "factor": c["factor"]}
    if c["original_len"] is not None:
        out["original_max_position_embeddings"] = c["original_len"]
    names = {"low_freq": "low_freq_factor", "high_freq": "high_freq_factor"}
    for key in ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate", "low_freq",
                "high_freq"):
        if c.get(key) is not None:
            out[names.get(key, key)] = c[key]
    if c["scaling"] == "llama3":
        out.setdefault("low_freq_factor", 1.0)
        out.setdefault("high_freq_factor", 4.0)
    if c["scaling"] == "longrope":
        out.update(short_factor=list(c["short_factor"]), long_factor=list(c["long_factor"]))
    return out


def max_positions(c: dict) -> int:
    """HF's ``max_position_embeddings``: L for dynamic NTK (its L), s·L for YaRN, Llama 3 and LongRoPE."""
    if c["scaling"] == "dynamic":
        return c["original_len"]
    if c["scaling"] in ("yarn", "llama3", "longrope"):
        return int(c["original_len"] * (c["factor"] or 1.0))
    return 4096


class Embedding:
    def __init__(self, config: dict) -> None:
        from mlx_lm.models.rope_utils import initialize_rope

        self.c, self.r = config, 2 * int(config["fraction"] * config["head_dim"] / 2)
        if config["factor"] is not None and config["factor"] < 1 and config["scaling"] == "none":
            raise ValueError("factor without a scaling")
        traditional = config.get("pairs") == "interleaved"  # mlx's own name for (2i, 2i + 1) pairs
        self.rope = initialize_rope(self.r, config["base"], traditional, scaling_config(config), max_positions(config))

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
        unit = np.zeros((1, pos.size, self.c["head_dim"]))
        first = slice(0, self.r, 2) if self.c.get("pairs") == "interleaved" else slice(0, self.r // 2)
        second = slice(1, self.r, 2) if self.c.get("pairs") == "interleaved" else slice(self.r // 2, self.r)
        unit[..., first] = 1.0
        y = self.rotate(unit, pos)[0]
        return y[:, first], y[:, second]


def build(config: dict) -> Embedding:
    return Embedding(config)
