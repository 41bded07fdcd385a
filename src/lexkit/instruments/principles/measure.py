"""The paper's three design principles (*A Length-Extrapolatable Transformer*, Sec. 2.1),
measured on a model: order variance and translation invariance here; length extrapolation is
what the evaluation measures (:mod:`lexkit.evaluate`).

* **order variance**: max |f(P X) - P f(X)| / max |f(X)| for a random permutation P of the
  tokens (0 would be a bag of words);
* **translation invariance**: max |f(X; offset k) - f(X)| / max |f(X)| for k = half the training
  length (0 for relative schemes up to rounding; ``learned`` is evaluated within its table).

Both use one validation text of half the training length, so the shifted copy stays inside
the positions training saw.
"""

from __future__ import annotations

import torch

from ...core.device import device_of, eval_mode
from ...data.corpus import encode


def measure_principles(model, docs: list[bytes]) -> dict:
    """``{"order_variance", "translation", "offset", "tokens"}`` of ``model`` (a :class:`GPT`)
    on the first document of ``docs`` long enough; both None when none is."""
    n = model.cfg.train_len // 2
    doc = next((d for d in docs if len(d) >= n), None)
    if doc is None:
        return {"order_variance": None, "translation": None}
    x = encode(doc)[:n][None].to(device_of(model))  # [1, n]
    gen = torch.Generator().manual_seed(0)
    perm = torch.randperm(n, generator=gen)
    offset = model.cfg.train_len // 2
    with eval_mode(model), torch.no_grad():
        base = model(x)[0]  # [n, V]
        permuted = model(x[:, perm])[0]
        scale = base.abs().max().item()
        order = (permuted - base[perm]).abs().max().item() / scale
        shifted = model(x, offset=offset)[0]
        translation = (shifted - base).abs().max().item() / scale
    return {"order_variance": order, "translation": translation, "offset": offset, "tokens": n}
