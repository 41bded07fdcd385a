"""How many CPU threads torch runs on: one policy for every ``lexkit`` command (docs/threads.md).

torch takes every core by default. Two jobs that each do so share the cores with OpenMP threads
that spin and wait for each other at every parallel region, and both crawl (a ``quick``
training step took 1.4 s instead of 0.12 s beside a second torch job on a 2-core machine). The
policy, a pure function (:func:`choose`) of what :func:`apply` gathers:

1. ``--threads N`` (train, eval, sample, retrieval, study): N threads;
2. else ``LEXKIT_THREADS=N`` in the environment (every command): N threads (either one more than
   the cores: N all the same, and one ``warning:`` line, since threads past the cores wait on each
   other at every parallel region);
3. else ``OMP_NUM_THREADS`` set (``torchrun`` sets it to 1 per rank): torch follows it, lexkit
   leaves it alone;
4. else what other processes keep busy right now (:class:`Probe`: their CPU time while this
   command starts, from ``/proc``; elsewhere the load average less this process): under half a
   core, torch's own choice (every core); otherwise the cores they leave free, rounded, at least
   one, and one ``warning:`` line saying so and how to choose.

The choice is made once, when a command starts, and holds for the whole process: results are
reproducible bit for bit at one thread count, and reductions split differently over another
count change the last bits (docs/threads.md). A job that started first keeps its threads.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from collections.abc import Mapping

from . import checks

ENV = "LEXKIT_THREADS"
MAX_THREADS = 4096  # the --threads limit of every command
#: the help of every command's --threads
HELP = (f"torch CPU threads (default: every core, fewer when other processes keep some busy; {ENV}=N sets "
        "it for every command; docs/threads.md)")
#: other processes busy for less than this many cores leave torch its own choice
IDLE_BELOW = 0.5
#: the shortest window :class:`Probe` measures other processes' CPU time over
MIN_WINDOW = 0.1


@dataclasses.dataclass(frozen=True)
class Choice:
    """Threads for torch (None: torch's own choice), why, and the warning to print (or None)."""

    threads: int | None
    source: str  # "--threads", "LEXKIT_THREADS", "OMP_NUM_THREADS", "idle" or "busy"
    warning: str | None = None


def env_threads(env: Mapping[str, str]) -> int | None:
    """``LEXKIT_THREADS`` as a count of threads (None when unset or empty); ValueError otherwise."""
    text = env.get(ENV, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not 1 <= value <= MAX_THREADS:
        raise ValueError(f"{ENV}={text!r}: expected a number of threads from 1 to {MAX_THREADS} "
                         f"(e.g. {ENV}=1), or unset it for lexkit's choice")
    return value


def probe_needed(env: Mapping[str, str]) -> bool:
    """Whether a :class:`Probe` could decide anything: not when the environment fixes the count
    (``LEXKIT_THREADS`` or ``OMP_NUM_THREADS`` set; a bad value is refused later, by :func:`choose`)."""
    return not env.get(ENV, "").strip() and not env.get("OMP_NUM_THREADS", "").strip()


def choose(cores: int, busy: float | None, env: Mapping[str, str], asked: int | None = None) -> Choice:
    """The policy of the module docstring. ``cores``: the CPUs this process may run on;
    ``busy``: how many cores other processes kept busy while it started (None: unknown);
    ``env``: the environment; ``asked``: ``--threads`` (None when not given)."""
    if asked is not None:
        checks.number("--threads", asked, maximum=MAX_THREADS)
        return Choice(asked, "--threads", _oversubscribed(f"--threads {asked}", asked, cores))
    from_env = env_threads(env)
    if from_env is not None:
        return Choice(from_env, ENV, _oversubscribed(f"{ENV}={from_env}", from_env, cores))
    if env.get("OMP_NUM_THREADS", "").strip():
        return Choice(None, "OMP_NUM_THREADS")
    if busy is None or busy < IDLE_BELOW:
        return Choice(None, "idle")
    threads = max(1, min(cores, math.floor(cores - busy + 0.5)))
    if threads >= cores:
        return Choice(None, "idle")
    s = "s" if threads != 1 else ""
    return Choice(threads, "busy",
                  f"other processes keep {busy:.1f} of this machine's {cores} cores busy: running {threads} "
                  f"thread{s} instead of {cores} (jobs that each take every core slow each other down many "
                  f"times); choose with --threads N or {ENV}=N")


def _oversubscribed(given: str, threads: int, cores: int) -> str | None:
    """The warning for a thread count above the cores (None at or below them)."""
    if threads <= cores:
        return None
    return (f"{given} is more threads than the {cores} core{'s' if cores != 1 else ''} this process may run on: "
            f"running {threads} all the same, but threads past the cores wait on each other at every parallel "
            f"region (docs/threads.md); {cores} or fewer is faster")


def use(threads: int, what: str = "--threads") -> None:
    """Set torch's CPU threads to ``threads`` (1 to :data:`MAX_THREADS`, else a ValueError naming
    ``what``): the one place lexkit sets them, for the policy and for a study's or a job's own count."""
    checks.number(what, threads, maximum=MAX_THREADS)
    import torch

    torch.set_num_threads(threads)


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


class Probe:
    """Other processes' CPU time, from now until :meth:`busy`: how many cores they keep busy.
    Made when a command starts, read once its modules are imported (so the window costs no
    extra time); never shorter than ``MIN_WINDOW``."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.first = cpu_times()

    def busy(self) -> float | None:
        wait = MIN_WINDOW - (time.monotonic() - self.started)
        if wait > 0:
            time.sleep(wait)
        if self.first is None:
            return _load_average()
        second = cpu_times()
        if second is None:
            return _load_average()
        seconds = time.monotonic() - self.started
        ticks = sum(t - self.first[pid] for pid, t in second.items() if pid in self.first)
        return max(0.0, ticks / _ticks_per_second() / seconds)


def cpu_times() -> dict[int, int] | None:
    """User + system CPU time of every other process, in clock ticks (None without /proc)."""
    if not os.path.isdir("/proc/self"):
        return None
    me, out = os.getpid(), {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()  # after the command name, which may hold spaces
        except (OSError, IndexError):
            continue  # gone meanwhile, or not readable
        out[int(name)] = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return out


def _ticks_per_second() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return 100


def _load_average() -> float | None:
    """Without /proc: the 1-minute load average less this process (which is starting)."""
    try:
        return max(0.0, os.getloadavg()[0] - 1.0)
    except (AttributeError, OSError):
        return None


def apply(asked: int | None = None, probe: Probe | None = None, env: Mapping[str, str] | None = None) -> Choice:
    """Choose (:func:`choose`) and set torch's CPU threads; print the choice's warning line.
    ``probe`` is only read when the choice depends on it (no ``--threads``, ``LEXKIT_THREADS``
    or ``OMP_NUM_THREADS``)."""
    env = os.environ if env is None else env
    n = cores()
    decided = choose(n, None, env, asked)
    if decided.source == "idle":  # nothing fixed it: look at the machine
        decided = choose(n, (probe or Probe()).busy(), env)
    if decided.threads is not None:
        use(decided.threads, decided.source)
    if decided.warning:
        print(f"warning: {decided.warning}", file=sys.stderr)
    return decided
