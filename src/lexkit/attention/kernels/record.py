"""Which kernels ran: :func:`record_kernels` collects what every attention call inside it ran, for
training metrics and evaluation rows."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

_RECORDS: list[list[str]] = []


@contextlib.contextmanager
def record_kernels() -> Iterator[list[str]]:
    """Collects, in first-run order, the kernels every attention call inside the block actually
    ran (``Attention.ran``: ``dense``, ``chunked``, ``flex`` or a ladder rung such as
    ``flex:128x64/2``; the KV cache's ``chunked``). Training metrics and evaluation rows report
    them through :func:`kernel_label`."""
    ran: list[str] = []
    _RECORDS.append(ran)
    try:
        yield ran
    finally:
        _RECORDS[:] = [r for r in _RECORDS if r is not ran]


def note_ran(label: str) -> None:
    """Tell every open :func:`record_kernels` that ``label`` ran. Not while torch.compile traces (the
    lists would be guarded, and each step's new one would recompile): the compiled training step
    (:class:`lexkit.training.compiled.CompiledLoss`) tells them what its eager first forward ran."""
    import torch

    if torch.compiler.is_compiling():
        return
    for ran in _RECORDS:
        if label not in ran:
            ran.append(label)


def kernel_label(ran: list[str]) -> str | None:
    """One field for a row: the kernels joined by ``+`` (``flex+chunked`` when the ladder fell
    back part-way), or None when no attention ran."""
    return "+".join(ran) or None
