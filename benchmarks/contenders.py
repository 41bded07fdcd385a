"""The contenders: lexkit and x-transformers built to the same network, each trained by lexkit's
own step and optimizer builder; and how much of each is measured (quick or full)."""

from __future__ import annotations

import dataclasses

import torch

from builders import lexkit_model, xt_model
from lexkit.model.gpt import ModelConfig
from lexkit.training.loop import make_optimizer, train_step
from lexkit.training.presets import get as preset
from lexkit.training.settings import TrainConfig, configs

SCHEMES = ("alibi", "rope", "xpos")
SIZE = "small"  # the preset both libraries are measured at
SMALL = preset(SIZE)
BATCH, TRAIN_LEN, D_MODEL, N_LAYERS, N_HEADS = (
    SMALL[k] for k in ("batch", "train_len", "d_model", "n_layers", "n_heads")
)
TRAIN = configs(SIZE)[1]  # the training config both libraries train with
WINDOW = TRAIN_LEN  # W of window:W and bca:W
PATTERNS = (f"window:{WINDOW}", f"bca:{WINDOW}")


@dataclasses.dataclass
class Settings:
    warmup: int  # training steps per contender before timing (>= 1; the last one is profiled)
    reps: int  # timed repetitions per contender (alternating)
    steps: int  # training steps per repetition
    xt_variants: tuple[str, ...]  # x-transformers configurations timed in training (XT_VARIANTS)
    lengths: tuple[int, ...]  # lexkit evaluation lengths
    xt_lengths: tuple[int, ...]  # x-transformers evaluation lengths (its n x n mask must fit)
    eval_reps: int  # child processes per lexkit auto-kernel measurement
    eval_runs: int  # evaluations per lexkit child (the first one is reported apart)
    xt_runs: int  # evaluations per x-transformers child
    eval_schemes: tuple[str, ...]  # schemes evaluated with the auto kernel (window; alibi also bca)
    flex: bool  # also measure kernel="flex" (alibi, once per length and pattern): CUDA only, refused on the CPU


QUICK = Settings(warmup=2, reps=2, steps=1, xt_variants=("x-transformers",), lengths=(4096, 16384),
                 xt_lengths=(4096,), eval_reps=1, eval_runs=2, xt_runs=1, eval_schemes=("alibi",), flex=False)
FULL = Settings(warmup=2, reps=4, steps=3,
                xt_variants=("x-transformers", "x-transformers flash", "x-transformers defaults"),
                lengths=(4096, 16384, 65536), xt_lengths=(4096, 8192), eval_reps=2, eval_runs=2, xt_runs=2,
                eval_schemes=SCHEMES, flex=False)  # compiled flex is refused on the CPU (docs/kernels.md)


def model_config(scheme: str) -> ModelConfig:
    """The network both libraries build for ``scheme``: lexkit's at the :data:`SIZE` preset (x-transformers'
    built to it by :func:`builders.xt_model`; see render.CONFIG_NOTES)."""
    return configs(SIZE, scheme)[0]


#: the x-transformers configurations training is timed with: name -> xt_model keywords
XT_VARIANTS = {
    "x-transformers": {},  # lexkit's network, x-transformers' default attention path
    "x-transformers flash": {"flash": True},  # lexkit's network, attn_flash=True (SDPA)
    "x-transformers defaults": {"matched": False},  # its README configuration: a bigger network
}


class Contender:
    """One contender: a model and its optimizer, stepped by :func:`lexkit.training.loop.train_step` (the
    step ``lexkit train`` runs) with the optimizer of :func:`lexkit.training.loop.make_optimizer`."""

    def __init__(self, name: str, model: torch.nn.Module, train_cfg: TrainConfig) -> None:
        self.name, self.model = name, model.train()
        self.optimizer, self.grad_clip = make_optimizer(model, train_cfg), train_cfg.grad_clip

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        return train_step(self.model, self.optimizer, x, y, grad_clip=self.grad_clip)


def contenders(scheme: str, settings: Settings) -> list[Contender]:
    """lexkit first, then each x-transformers variant, all from the same seed and training config."""
    out = [Contender("lexkit", lexkit_model(SIZE, scheme)[0], TRAIN)]
    for name in settings.xt_variants:
        torch.manual_seed(0)
        out.append(Contender(name, xt_model(model_config(scheme), **XT_VARIANTS[name]), TRAIN))
    return out
