"""Named model + training sizes, as data. A preset fills every field a command does not set.

``tiny`` trains and evaluates in seconds (tests); ``quick`` is a first look at the study on a
laptop; ``small`` is the CPU study size (about 0.8M parameters, training length 128); ``medium``
and ``paper`` (the paper's 24 layers, hidden 1024, 16 heads, training length 1024) are for a GPU.
"""

from __future__ import annotations

PRESETS: dict[str, dict] = {
    "tiny": dict(n_layers=2, d_model=32, n_heads=2, train_len=32, steps=40, batch=8, lr=3e-3, warmup=5,
                 eval_every=20, save_every=20, eval_windows=8),
    "quick": dict(n_layers=2, d_model=64, n_heads=4, train_len=64, steps=300, batch=32, lr=3e-3, warmup=30,
                  eval_every=100, save_every=100, eval_windows=32),
    "small": dict(n_layers=4, d_model=128, n_heads=4, train_len=128, steps=480, batch=24, lr=3e-3, warmup=48,
                  eval_every=240, save_every=120, eval_windows=64),
    "medium": dict(n_layers=12, d_model=512, n_heads=8, train_len=512, steps=20000, batch=64, lr=6e-4,
                   warmup=1000, eval_every=1000, save_every=1000, eval_windows=256),
    "paper": dict(n_layers=24, d_model=1024, n_heads=16, train_len=1024, steps=50000, batch=64, lr=3e-4,
                  warmup=2000, eval_every=2000, save_every=2000, eval_windows=256),
}


def get(name: str) -> dict:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; valid: {', '.join(PRESETS)}")
    return dict(PRESETS[name])
