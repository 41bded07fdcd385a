"""``lexkit train``: train a byte-level LM with one position scheme at one length.

Every setting (a field of the model's or the training's config, its flag made from it) defaults to
the preset's value; on ``--resume`` only the settings given on the command line are compared with the
run's (a larger ``--steps`` extends the run). ``--init RUN`` starts from a trained run's weights and
settings (fresh optimizer): the short fine-tune at a longer ``--train-len`` under a RoPE scaling
(``--scheme rope:scaling=yarn,factor=4``), recorded in the new run's config.json.

Under ``torchrun --nproc_per_node N`` it trains with DistributedDataParallel (``--fsdp``: FSDP2)
over N processes; ``--batch`` stays the global batch and must divide by N (docs/distributed.md).
"""

from __future__ import annotations

import warnings
from pathlib import Path

from ..core import options, threads
from ..instruments.subject import default_lengths
from ..training import presets, settings
from ..training.distributed import setup
from ..training.loop import train
from ..training.runs import configs_from_run, configs_to_resume, read_config

#: the groups of ``lexkit train --help``, one per settings dataclass (:func:`sections`): title, config.json section
GROUPS = (("the model", "model"), ("the training", "train"))


def sections() -> tuple[type, type]:
    """The dataclasses whose fields are ``lexkit train``'s settings, looked up when the command is made."""
    return settings.ModelConfig, settings.TrainConfig


def add_parser(sub):
    p = sub.add_parser("train", help="train a model at a short length", description=__doc__,
                       epilog="Defaults shown are the `small` preset's; `lexkit presets` lists every preset's values.")
    p.add_argument("--scheme", help="position scheme spec, e.g. rope, xpos:gamma=0.5 (see `lexkit schemes`); with "
                   "--layout, the scheme of the layers that name none (default rope)")
    p.add_argument("--out", required=True, help="run directory (must be new or empty, unless --resume)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--init", metavar="RUN", help="start from the weights and settings of trained run RUN "
                   "(e.g. a longer --train-len with --scheme rope:scaling=yarn,factor=4; default scheme: RUN's)")
    p.add_argument("--preset", default=None, choices=list(presets.PRESETS),
                   help="size preset (default: small; see `lexkit presets`)")
    for section, (title, key) in zip(sections(), GROUPS):
        group = p.add_argument_group(title, f"config.json's {key}; each defaults to the preset's value, the parent's "
                                     "under --init, the run's own under --resume")
        options.add_flags(group, section, unset=True, describe=_describe)
    running = p.add_argument_group("how it runs", "the machine and the outputs, not settings of the run")
    running.add_argument("--threads", type=int, metavar="N", help=threads.HELP)
    running.add_argument("--device", default="auto", help="auto, cpu, cuda or mps (default: auto)")
    running.add_argument("--quiet", "--no-progress", dest="quiet", action="store_true",
                         help="no progress bar (--no-progress: the same, as the other commands write it)")
    running.add_argument("--fsdp", action="store_true",
                         help="under torchrun: shard parameters and optimizer state over the processes (FSDP2)")
    running.add_argument("--tensorboard", nargs="?", const="", default=None, metavar="DIR",
                         help="also write the metrics as TensorBoard event files in DIR (default DIR: RUN/tb; "
                         "needs pip install -e '.[tb]')")
    return p


def _describe(field, text: str | None) -> str | None:
    """A setting's help, with the preset's value where a preset sets it (the preset sizes)."""
    small = presets.PRESETS["small"]
    if field.name not in small:
        return text
    value = small[field.name]
    return f"{text} (default: the preset's, {f'{value:g}' if isinstance(value, float) else value} in small)"


def _overrides(args) -> dict:
    """Every setting with a flag, as given (None: not given; the repeated ``--mix`` joined)."""
    return {key: value for section in sections() for key, value in options.given(args, section, unset=True).items()}


def run(args) -> int:
    overrides = _overrides(args)
    if args.init is not None and args.resume:
        raise ValueError("--init starts a new run and --resume continues one; give one of them")
    if args.init is not None:
        if args.preset is not None:
            raise ValueError("--init takes its settings from RUN; --preset does not apply")
        model_cfg, train_cfg = configs_from_run(args.init, args.scheme, **overrides)
    elif args.resume:  # the run's own settings; what the command line gives is compared against them
        world, _ = setup(args.device)  # under torchrun, rank 0 reads the run; the others get its config
        old = world.on_main(lambda: read_config(args.out, training=True))
        model_cfg, train_cfg = configs_to_resume(old, args.scheme, **overrides)
    else:
        if args.scheme is None and args.layout is None:
            raise ValueError("--scheme or --layout is required (see `lexkit schemes`, `lexkit layouts`)")
        model_cfg, train_cfg = settings.configs(args.preset or "small", args.scheme or "rope", **overrides)
    if not args.resume:  # a resumed run was warned when it started
        inert = settings.inert_modifier(model_cfg, max(default_lengths(model_cfg.train_len)))
        if inert is not None:
            warnings.warn(inert, stacklevel=1)
    tensorboard = None if args.tensorboard is None else args.tensorboard or str(Path(args.out) / "tb")
    summary = train(args.out, model_cfg, train_cfg, resume=args.resume, device=args.device,
                    threads=args.threads, progress=not args.quiet, fsdp=args.fsdp, init=args.init,
                    tensorboard=tensorboard)
    if "val_bpb" in summary:
        print(f"{args.out}: {summary['step']} steps, loss {summary['loss']:.4f}, "
              f"validation {summary['val_bpb']:.4f} bits/byte")
    return 0
