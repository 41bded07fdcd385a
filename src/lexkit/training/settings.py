"""A run's settings: the training config, the sizes a user may give, and the named presets filled in.

Every setting is declared once, as a field of :class:`TrainConfig` or of
:class:`lexkit.model.gpt.ModelConfig` whose metadata (:mod:`lexkit.core.options`) holds its help, its
bounds and whether it is a ``lexkit train`` flag: the command's flags are made from the fields
(:mod:`lexkit.cli.train`, :func:`flags`), the bounds are checked here as a config is built (``lexkit.train``
refuses what the command refuses), and config.json keeps every field. :func:`configs` fills a preset and
applies explicit overrides; :func:`split_settings` turns one flat dict (a preset's, a run's config.json)
into the model's and the trainer's configs (on resume: :func:`lexkit.training.runs.configs_to_resume`).
The trainer (:mod:`lexkit.train`), the run directory (:mod:`lexkit.training.runs`) and the study read
them; none of them is needed to build one.
"""

from __future__ import annotations

import dataclasses
import math

from .. import tasks
from ..core import checks, options
from ..core.options import setting
from ..data.mix import mix_text, parse_mix
from ..model.gpt import ModelConfig
from . import compiled, presets, stopping


@dataclasses.dataclass
class TrainConfig:
    """How a run trains, each setting declared once (:func:`lexkit.core.options.setting`): its ``lexkit train``
    flag, where it has one, is made from its field (:mod:`lexkit.cli.train`), its bounds are checked here as the
    config is built, and config.json's ``train`` keeps it (:meth:`recorded`). A new setting is one field."""

    steps: int = setting(1000, "training steps")
    batch: int = setting(32, "sequences per step")
    lr: float = setting(2e-3, "peak learning rate", maximum=checks.MAX_LR)
    warmup: int = setting(100, "steps of linear learning-rate warmup", flag=False, minimum=0)
    min_lr_ratio: float = setting(0.1, "the cosine decay's floor, a fraction of lr", flag=False, minimum=0, maximum=1.0)
    weight_decay: float = setting(0.1, "AdamW weight decay", flag=False, minimum=0, maximum=checks.MAX_LR)
    grad_clip: float = setting(1.0, "the gradients' 2-norm clipped to at most this", flag=False, maximum=1e9)
    seed: int = setting(0, "random seed (default: 0)", minimum=0, maximum=2**63 - 1)
    data: str = setting("stdlib", "stdlib (default), a file, directory or glob, or hf:NAME[:CONFIG[:SPLIT]]; on "
                        "--resume: the run's corpus at a new place (checked by its fingerprint)")
    eval_every: int = setting(250, "validation bpb every N steps")
    eval_windows: int = setting(64, "validation windows scored at each validation", flag=False)
    save_every: int = setting(250, "checkpoint every N steps")
    log_every: int = setting(10, "a metrics row every N steps", flag=False)
    #: retrieval documents among the windows, "passkey:0.05,copy:0.1" (mix.MixedStream)
    mix: str = setting("", "retrieval documents (a task of `lexkit tasks`; docs/retrieval.md) as this fraction of "
                       "the training windows, e.g. passkey:0.05; repeatable (default: none)", metavar="TASK:FRACTION",
                       join=",")
    # -- the token tables (lexkit.training.embedding; a config without these keys trains as before) --
    #: AdamW's weight decay on the embedding; None: ``weight_decay``, as on every other matrix
    embedding_decay: float | None = setting(None, "AdamW weight decay on the embedding, 0 for none (default: the other "
                                            "matrices', 0.1)", type=float, metavar="D", minimum=0,
                                            maximum=checks.MAX_LR)
    #: the embedding kept at its random init (tied: the head too, one tensor)
    freeze_embedding: bool = setting(False, "keep the embedding at its random init (tied: the head too; default: "
                                     "trained)")
    #: every N steps, re-draw the rows of the byte values no training batch has held yet (0: never)
    reset_unseen: int = setting(0, "every N steps, draw again the embedding (and untied head) rows of the bytes no "
                                "training batch has held yet, their AdamW moments zeroed (default: 0, never)",
                                metavar="N", minimum=0)
    # -- position dropping (DroPE, lexkit.training.dropping) --
    #: from step ceil(F * steps) on, the selected layers train, and the run evaluates, with no positions
    drop_positions_at: float | None = setting(None, "DroPE: from step ceil(F*steps) on, train the --drop-layers "
                                              "without their position scheme (none), and evaluate the run so, e.g. "
                                              "0.875 (default: off)", type=float, metavar="F")
    #: the layers whose positions go: a selector (local, global, L3, L0-2); None: every layer
    drop_layers: str | None = setting(None, "the layers --drop-positions-at drops: local, global, L3 or L0-2 "
                                      "(default: every layer)", type=str, metavar="SELECTOR")
    #: a rule that ends the run once the mix's probe converged (lexkit.training.stopping; "": none)
    stop: str = setting("", "end the run once the mix's probe has converged: probe:exact=E,probes=K,after=S stops at "
                        "the first validation at step S or later ending K in a row with every task's probe at E or "
                        "more (lexkit.training.stopping; recorded in config.json; default: none)", metavar="RULE")
    #: for the first ceil(F * steps) steps the mix draws each task's curriculum values (kvthread: one hop)
    curriculum: float = setting(0.0, "for the first F of the steps the mix draws each task's easier documents "
                                "(kvthread: one hop; `lexkit tasks`), then its usual ones, e.g. 0.25 (default: 0, "
                                "none)", metavar="F")
    #: the training step compiled (torch.compile, :mod:`lexkit.training.compiled`): True, False, or None for the
    #: device's default (:data:`lexkit.training.compiled.DEFAULT`); how a run trains, not what: a runtime key
    compile: bool | None = setting(None, compiled.HELP, type=bool)

    def __post_init__(self) -> None:
        self.mix = mix_text(parse_mix(self.mix))
        self.stop = stopping.canonical(self.stop)
        options.check(self, str)  # every field's declared bounds and choices, named by its key
        if self.compile is not None and not isinstance(self.compile, bool):
            raise ValueError(f"compile must be true, false or null (the device's default), got {self.compile!r}")
        if not isinstance(self.freeze_embedding, bool):
            raise ValueError(f"freeze_embedding must be true or false, got {self.freeze_embedding!r}")
        if self.freeze_embedding and self.reset_unseen:
            raise ValueError(f"--freeze-embedding keeps every row of the embedding at its init and --reset-unseen "
                             f"{self.reset_unseen} re-draws some of them; give one of them")
        if self.freeze_embedding and self.embedding_decay is not None:
            raise ValueError(f"--embedding-decay {self.embedding_decay:g}: a frozen embedding (--freeze-embedding) "
                             "is not in the optimizer, so no decay reaches it; give one of them")
        if isinstance(self.curriculum, bool) or not isinstance(self.curriculum, (int, float)) \
                or not 0 <= self.curriculum < 1:
            raise ValueError(f"--curriculum must be a fraction of the steps in [0, 1) (e.g. 0.25), got "
                             f"{self.curriculum!r}")
        self.curriculum = float(self.curriculum)
        if self.curriculum and not any(tasks.has_curriculum(t) for t in parse_mix(self.mix)):
            raise ValueError(f"--curriculum {self.curriculum:g}: no task of the mix ({self.mix or 'none'}) has a "
                             "curriculum (kvthread has: one hop first); give --mix kvthread:F")
        if self.drop_layers is not None and (not isinstance(self.drop_layers, str) or not self.drop_layers.strip()):
            raise ValueError(f"--drop-layers must be a layer selector (all, local, global, L3, L0-2), "
                             f"got {self.drop_layers!r}")
        if self.drop_positions_at is not None:
            value = self.drop_positions_at
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
                raise ValueError(f"--drop-positions-at must be a fraction of the steps strictly between 0 and 1 "
                                 f"(e.g. 0.875), got {value!r}")
        elif self.drop_layers is not None:
            raise ValueError(f"--drop-layers {self.drop_layers} selects the layers whose positions "
                             "--drop-positions-at drops; give --drop-positions-at F too")

    def recorded(self) -> dict:
        """The config as config.json, results.json and cache keys keep it: every field, but
        ``stop`` and ``curriculum`` only when set and ``compile`` only when given (a run without them
        keeps the keys it had before)."""
        out = dataclasses.asdict(self)
        for key in ("stop", "curriculum"):  # unset: the keys a run had before the setting existed
            if not out[key]:
                del out[key]
        if out["compile"] is None:
            del out["compile"]
        return out

    @property
    def curriculum_steps(self) -> int:
        """The steps the curriculum's first part lasts: ceil(curriculum * steps) (0: none)."""
        return math.ceil(self.curriculum * self.steps) if self.curriculum else 0

    def canonical(self) -> TrainConfig:
        """This config with every setting that trains alike written one way: an embedding decay equal
        to the weight decay is the default (None: the embedding in the decayed group, which AdamW steps
        element by element as its own group, bit for bit). What the study keys and trains a cell by."""
        if self.embedding_decay is not None and self.embedding_decay == self.weight_decay \
                and not self.freeze_embedding:
            return dataclasses.replace(self, embedding_decay=None)
        return self


#: settings that may change on --resume without changing the run (``compile``: the same step, compiled or
#: not, equal within float32 noise: tests/test_compile.py)
RUNTIME_KEYS = {"save_every", "log_every", "eval_every", "compile"}


def configs(preset: str = "small", scheme: str = "rope", **overrides) -> tuple[ModelConfig, TrainConfig]:
    """Model and training configs from a preset, with explicit overrides (None = preset's value)."""
    values = presets.get(preset)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return split_settings(scheme, values)


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
    """Sizes a user gives, within what fits: the bounds ModelConfig's fields declare (ModelConfig checks
    they are positive as it is built; a model read from elsewhere may be larger)."""
    options.check(cfg, str)


def flags() -> dict[str, str]:
    """Each setting's ``lexkit train`` flag by its key, from the fields of :class:`ModelConfig` and
    :class:`TrainConfig` (``n_layers``: ``--layers``)."""
    return {field.name: options.flag_of(field) for section in (ModelConfig, TrainConfig)
            for field in options.flagged(section)}


def preset_flags() -> dict[str, str]:
    """The flag (of ``lexkit train``; ``lexkit study`` has ``--steps``) that overrides each preset key
    (:data:`lexkit.training.presets.PRESETS`); the keys without one (warmup, eval_windows) follow the preset."""
    return {key: flag for key, flag in flags().items() if key in presets.PRESETS["small"]}


def inert_modifier(cfg: ModelConfig, longest: int) -> str | None:
    """The one check of ``lexkit train`` (a warning) and of a sweep's arms (a refusal): a modifier
    whose settings make it do nothing both at the training length and at ``longest``, the longest
    length the run is evaluated at (:meth:`lexkit.layouts.LayerStack.inert`: ``+topk:1000000000``,
    ``+chunks:1000`` on a model trained at 32): a sentence naming it, None when every modifier acts."""
    found = cfg.stack.inert(sorted({cfg.train_len, int(longest)}))
    if found is None:
        return None
    what, why = found
    return (f"{what} does nothing at the training length {cfg.train_len} nor at {longest}, the longest evaluated "
            f"({why}): the layer trains and scores as without it; give a setting that acts at these lengths")


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
                if section == "model" and key == "layout" and same_layers(old["model"], new["model"]):
                    continue  # the same layout written another way (spacing, a named layout written out)
                out.append(f"{section}.{key} ({old[section].get(key)!r} -> {new[section].get(key)!r})")
    return out


def same_layers(old: dict, new: dict) -> bool:
    """Whether two model sections build the same layers (their resolved layer stacks are equal)."""
    try:
        return ModelConfig(**old).resolved() == ModelConfig(**new).resolved()
    except (TypeError, ValueError):
        return False
