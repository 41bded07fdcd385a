"""What several commands do with the options they share, before any work: the output files checked
(a bad one fails now, not after an hour of scoring) and the device resolved with its CPU threads."""

from __future__ import annotations

from .. import checks
from ..device import resolve_device


def check_outputs(args) -> None:
    """``--json``/``--csv`` writable, ``--plot`` a figure's file (``args.plot`` gets its suffix)."""
    for flag in ("json", "csv"):
        if getattr(args, flag, None) is not None:
            checks.writable(f"--{flag}", getattr(args, flag))
    if getattr(args, "plot", None) is not None:
        args.plot = checks.png_path("--plot", args.plot)


def device(args) -> str:
    """The device the command runs on (``--device``), torch's CPU threads set to ``--threads``."""
    checks.number("--threads", args.threads, maximum=4096)
    resolved = str(resolve_device(args.device))
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    return resolved
