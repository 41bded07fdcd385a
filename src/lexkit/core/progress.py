"""A progress bar with rate and ETA for long loops (rich), quiet when output is not a terminal
unless asked. Every long-running library call takes ``progress: bool``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext

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
from rich.table import Column
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


#: a log that is not a terminal (CI, ``nohup``) gets a plain line at least this often, and each time the share done
#: grows by :data:`LOG_STEP`
LOG_EVERY, LOG_STEP = 60.0, 0.05


@contextmanager
def watch(description: str, state: Callable[[], tuple[float, str, str]], *, enabled: bool = True,
          every: float = 1.0, console: Console | None = None) -> Iterator[None]:
    """A bar for work that reports its own progress: every ``every`` seconds a thread reads
    ``state()`` (the share done, 0 to 1, a line of text: counts, ETA, and a detail: what runs) and
    shows it, with the time elapsed, until the block ends. On a terminal it is one line of its width:
    the bar, the percent, the clock and the text first, the detail cut to what is left. Elsewhere
    (a log) it is a plain line at the start, every :data:`LOG_EVERY` seconds or :data:`LOG_STEP`
    of the share, and at the end."""
    if not enabled:
        yield
        return
    console = console or Console(stderr=True)
    stop = threading.Event()

    def read() -> tuple[float, str, str] | None:
        try:
            return state()
        except RuntimeError:  # what it reads changed while it read: the next look
            return None

    if console.is_terminal:
        progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(bar_width=24), TaskProgressColumn(),
                            TimeElapsedColumn(), TextColumn("{task.fields[info]}"),
                            TextColumn("{task.fields[detail]}", table_column=Column(no_wrap=True, overflow="ellipsis",
                                                                                    ratio=1)),
                            console=console, transient=False, auto_refresh=False, expand=True)
        task = progress.add_task(description, total=1000, info="", detail="")

        def show(last: bool = False) -> None:
            seen = read()
            if seen is None:
                return
            share, text, detail = seen
            progress.update(task, completed=round(1000 * share), info=text, detail=detail)
            progress.refresh()
        context = progress
    else:
        begun, logged = time.perf_counter(), {"at": -LOG_EVERY, "share": -1.0}

        def show(last: bool = False) -> None:
            seen = read()
            if seen is None:
                return
            share, text, detail = seen
            now = time.perf_counter() - begun
            if last or now - logged["at"] >= LOG_EVERY or share - logged["share"] >= LOG_STEP:
                logged.update(at=now, share=share)
                line = f"{description} {100 * share:3.0f}% {_clock(now)} {text}" + (f"  {detail}" if detail else "")
                console.print(line, markup=False, highlight=False, soft_wrap=True)
        context = nullcontext()

    def loop() -> None:
        while not stop.wait(every):
            show()

    with context:
        show()
        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            show(last=True)


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
