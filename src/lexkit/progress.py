"""A progress bar with rate and ETA for long loops (rich), quiet when output is not a terminal
unless asked. Every long-running library call takes ``progress: bool``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text


@contextmanager
def bar(total: int, description: str, *, enabled: bool = True, unit: str = "it") -> Iterator[Bar]:
    """``with bar(100, "train") as b: b.advance(1, loss=...)``; shows the rate in ``unit``/s,
    elapsed time and ETA."""
    if not enabled:
        yield Bar(None, None)
        return
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        _Rate(unit),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )
    with progress:
        task = progress.add_task(description, total=total, info="")
        yield Bar(progress, task)


class _Rate(ProgressColumn):
    """The task's speed, e.g. ``1.2k B/s``."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{_fmt(speed) if speed < 1e3 else f'{speed / 1e3:,.1f}k'} {self.unit}/s")


class Bar:
    def __init__(self, progress: Progress | None, task) -> None:
        self.progress, self.task = progress, task

    def advance(self, n: int = 1, **info: object) -> None:
        if self.progress is None:
            return
        text = "  ".join(f"{k} {_fmt(v)}" for k, v in info.items())
        self.progress.update(self.task, advance=n, info=text)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e3 else f"{value:,.0f}"
    return str(value)


@contextmanager
def watch(description: str, state: Callable[[], tuple[float, str]], *, enabled: bool = True,
          every: float = 1.0) -> Iterator[None]:
    """A bar for work that reports its own progress: every ``every`` seconds a thread reads
    ``state()`` (the share done, 0 to 1, and a line of text: counts, ETA) and shows it, with the
    time elapsed, until the block ends."""
    if not enabled:
        yield
        return
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
                        TimeElapsedColumn(), TextColumn("{task.fields[info]}"), console=Console(stderr=True),
                        transient=False, auto_refresh=False)
    stop = threading.Event()

    def show() -> None:
        try:
            share, text = state()
        except RuntimeError:  # what it reads changed while it read: the next look
            return
        progress.update(task, completed=round(1000 * share), info=text)
        progress.refresh()

    def loop() -> None:
        while not stop.wait(every):
            show()

    with progress:
        task = progress.add_task(description, total=1000, info="")
        show()
        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            show()
