"""What several commands do with the options they share: the output files checked before any work (a
bad one fails now, not after an hour of scoring) and written after it, before anything is printed;
the device resolved (and a kernel it cannot run refused)."""

from __future__ import annotations

from ..core import checks
from ..core.device import resolve_device


def check_outputs(args) -> None:
    """``--json``/``--csv`` writable, ``--plot`` a figure's file (``args.plot`` gets its suffix)."""
    for flag in ("json", "csv"):
        if getattr(args, flag, None) is not None:
            checks.writable(f"--{flag}", getattr(args, flag))
    if getattr(args, "plot", None) is not None:
        args.plot = checks.png_path("--plot", args.plot)


def device(args) -> str:
    """The device the command runs on (``--device``); ``--kernel flex`` refused off CUDA before
    anything loads (:func:`lexkit.attention.kernels.refuse_cpu_flex`). (``--threads`` is applied
    for every command by :mod:`lexkit.core.threads`' policy before the command runs.)"""
    from ..attention import kernels

    resolved = str(resolve_device(args.device))
    kernels.refuse_cpu_flex(getattr(args, "kernel", "auto"), resolved)
    return resolved
