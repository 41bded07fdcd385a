"""The float64 reference every implementation is compared with, built from lexkit's own definitions:
the scalings of ``positions/scaling.py`` (the scheme built from the config's fields by
:func:`lexkit.positions.build`, validated as a ``rope:`` spec is, so the reference refuses what lexkit
refuses), LongRoPE of ``positions/longrope.py``, the rotation of ``positions/rotary.py`` and the xPos
and ReRoPE schemes' scores. Nothing here restates a formula, and no spec text is written or read (the
lexkit adapter, which runs what a model runs, builds from the spec text :func:`spec` gives)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .. import positions
from ..positions import longrope, scaling
from ..positions.rotary import rotary_angles, rotate_partial, xpos_zeta
from .adapter import from_interleaved, to_interleaved
from .config import SCALINGS, SCHEMES, YARN_KEYS, RopeConfig


def values(config: RopeConfig, *, partial: bool = True) -> tuple[str, dict[str, object]]:
    """The lexkit scheme of ``config``: its name and the parameter values given (None left out;
    LongRoPE has none: a ValueError). With ``partial=False`` the fraction is left out (the scheme of
    the r rotated dimensions alone)."""
    if config.scheme not in SCHEMES:
        raise ValueError(f"scheme {config.scheme!r}; valid: {', '.join(SCHEMES)}")
    if config.scaling not in SCALINGS:
        raise ValueError(f"scaling {config.scaling!r}; valid: {', '.join(SCALINGS)}")
    if config.scaling == "longrope":
        raise ValueError("longrope has no lexkit scheme spec (its factor lists): positions/longrope.py defines it")
    given: dict[str, object] = {"base": config.base}
    if config.scheme == "rerope":
        given.update(w=config.window, k=config.leak)
        if config.scaling != "none":
            raise ValueError("rerope takes no scaling")
    else:
        given["scaling"] = config.scaling
        for key in ("factor", "original_len", *YARN_KEYS, "low_freq", "high_freq"):
            given[key] = getattr(config, key)
    if config.scheme == "xpos":
        given.update(gamma=config.gamma, scale_base=config.scale_base, decay=config.decay)
    if partial and config.fraction != 1.0:
        given["fraction"] = config.fraction
    return config.scheme, {k: v for k, v in given.items() if v is not None}


def spec(config: RopeConfig, *, partial: bool = True) -> str:
    """:func:`values` as a lexkit scheme spec (what a model of that config is built from)."""
    name, given = values(config, partial=partial)
    return f"{name}:" + ",".join(f"{k}={_text(v)}" for k, v in given.items())


def _text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, float) else str(value)


def current_length(pos: Tensor) -> int:
    """The current length of a call at positions ``pos``: max(position) + 1 (0 for none)."""
    return int(pos.max()) + 1 if pos.numel() else 0


class Reference:
    """The float64 embedding of one :class:`RopeConfig` (the interface of
    :class:`lexkit.conformance.Embedding`). Building it raises ValueError for a config lexkit
    refuses (a factor below 1, a missing factor or length, a fraction that rotates nothing)."""

    def __init__(self, config: RopeConfig) -> None:
        self.config = config
        r = config.rotary_dims
        if r <= 0 or not 0 < config.fraction <= 1:
            raise ValueError(f"fraction={config.fraction} rotates no pair of a head of {config.head_dim} dimensions")
        self.rot_dims = r
        if config.scaling == "longrope":
            longrope.check(r, config.short_factor or (), config.long_factor or (), config.factor or 1.0,
                           config.original_len or 0)
            self.scheme = None
        else:  # the scheme over the r rotated dims validates the spec and gives θ' and a
            self.scheme = positions.build(*values(config, partial=False), n_heads=1, head_dim=r)
        self.full = None  # xpos / rerope over the whole head, for scores
        if config.scheme != "rope":
            if config.head_dim % 2:
                raise ValueError(f"{config.scheme} needs an even head_dim, got {config.head_dim}")
            self.full = positions.build(*values(config), n_heads=1, head_dim=config.head_dim)

    def frequencies(self, pos: Tensor) -> tuple[Tensor, float]:
        """(θ' float64 [r/2], a) for a call at positions ``pos`` [n]."""
        c = self.config
        if c.scaling == "longrope":
            return longrope.inv_freq(self.rot_dims, c.base, c.short_factor, c.long_factor, c.factor or 1.0,
                                     c.original_len, current_length(pos))
        if c.scheme == "rerope":
            return scaling.base_inv_freq(self.rot_dims, c.base), 1.0
        pos = pos.to(torch.long)
        return self.scheme.frequencies(pos, pos)

    def tables(self, pos: Tensor) -> tuple[Tensor, Tensor]:
        """(a·cos, a·sin) of p·θ'_i, float64 [n, r/2] each."""
        theta, a = self.frequencies(pos)
        cos, sin = rotary_angles(pos.to(torch.float64), self.rot_dims, 0.0, theta)
        return cos * a, sin * a

    def rotate(self, x: Tensor, pos: Tensor) -> Tensor:
        """x [H, n, h] with its first r dims rotated, float64; its pairs as the config holds them
        ((i, i + r/2), or (2i, 2i + 1) for ``pairs="interleaved"``)."""
        cos, sin = self.tables(pos)
        x = x.to(torch.float64)
        if self.config.pairs == "interleaved":
            return to_interleaved(rotate_partial(from_interleaved(x, self.rot_dims), cos, sin, self.rot_dims, None),
                                  self.rot_dims)
        return rotate_partial(x, cos, sin, self.rot_dims, None)

    def scores(self, q: Tensor, k: Tensor, pos: Tensor) -> Tensor:
        """q·k/√h after the scheme's position transform, q, k [H, n, h] at the same positions -> [H, n, n]."""
        q, k = q.to(torch.float64), k.to(torch.float64)
        if self.config.pairs == "interleaved":  # a pair layout is a permutation of q and k alike
            q, k = from_interleaved(q, self.rot_dims), from_interleaved(k, self.rot_dims)
        if self.full is not None:
            return self.full.scores(q[None], k[None], pos, pos)[0]
        return self.rotate(q, pos) @ self.rotate(k, pos).transpose(-1, -2) / math.sqrt(self.config.head_dim)

    def score_gain(self, pos: Tensor) -> Tensor:
        """[n, n]: the largest factor a pair's term of q·k gets from the position transform, a² for
        RoPE (times max_i ζ_i^((m-n)/B) under xPos): the scale of the scores' tolerance."""
        _, a = self.frequencies(pos)
        d = (pos[:, None] - pos[None, :]).to(torch.float64)
        gain = torch.full(d.shape, a * a, dtype=torch.float64)
        c = self.config
        if c.scheme == "xpos" and c.decay:
            log_zeta = torch.log(xpos_zeta(self.rot_dims, c.gamma))  # [r/2] < 0
            expo = d[..., None] / c.scale_base * log_zeta
            gain = gain * torch.exp(expo).amax(-1).clamp_min(1.0)
        return gain
