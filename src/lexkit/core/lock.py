"""One writer per directory: an exclusive ``fcntl.flock`` on ``DIR/.lock``, held while writing.

::

    with lock.hold(run_dir):        # raises LockedError if another live process holds it
        ...                         # write config, weights, metrics

The lock file holds the writer's process id (for the message a second writer gets). ``flock``
locks belong to the open file, so the kernel drops them when their process dies, however it
dies: a lock file left behind by a killed process is stale and the next writer simply takes it
(and writes its own id). The file is removed on release; a writer that opened it just before
the removal notices (its inode is no longer the path's) and tries again, so two writers can
never each hold a different inode.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from .errors import LexkitError

LOCK = ".lock"


class LockedError(LexkitError, ValueError):
    """Another live process is writing this directory."""


def holder(directory: str | Path) -> int | None:
    """The process id recorded in ``DIR/.lock`` (None when absent or unreadable)."""
    try:
        return int((Path(directory) / LOCK).read_text().strip() or "x")
    except (OSError, ValueError):
        return None


def is_locked(directory: str | Path) -> bool:
    """Whether a live process holds the directory's lock right now (a probe; takes nothing)."""
    path = Path(directory) / LOCK
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def acquire(directory: str | Path) -> int:
    """Take the exclusive lock of an existing directory; returns the open descriptor."""
    directory = Path(directory)
    path = directory / LOCK
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise LexkitError(f"cannot write in {directory} (to take its lock {LOCK}): {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LexkitError(f"cannot lock {directory}: {exc.strerror or exc}") from exc
            pid = holder(directory)
            who = f"process {pid}" if pid is not None else "another process"
            raise LockedError(f"{directory} is being written by {who}; wait for it to finish or stop it") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed this file as we opened it: lock the new one
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def release(directory: str | Path, fd: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(Path(directory) / LOCK)  # before unlocking: nobody can take the removed inode
    os.close(fd)


def take(directory: str | Path) -> int:
    """Create ``directory`` if missing and take its lock; returns the descriptor for
    :func:`release` (:func:`hold` for a ``with`` block)."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LexkitError(f"cannot create {directory}: {exc.strerror or exc}") from exc
    return acquire(directory)


@contextlib.contextmanager
def hold(directory: str | Path) -> Iterator[None]:
    """Hold ``directory``'s lock for the ``with`` block (the directory is created if missing)."""
    directory = Path(directory)
    fd = take(directory)
    try:
        yield
    finally:
        release(directory, fd)
