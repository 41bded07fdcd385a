"""A sweep's results, table and figure, from what its runs scored (nothing computed here): per arm and
pattern, each copy format and each task pooled over the seeds by table G's own queries
(:func:`lexkit.study.tables.retrieval.queries.retrieval_lines`, with the intervals they give), bpb at
1x and 16x, the step of the phase change, and the goal of docs/hunt.md. Written as ``sweep.md`` (the
table), ``sweep.json`` (every number, every multiple) and ``sweep.png`` (the figure)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ...core.checks import finite_or_none
from ...core.notation import count_range, ratio_with_interval
from ...documents import plots
from ...documents.blocks import Heading, Number, Table, Text
from ...documents.render import markdown
from ...documents.rows import jsonable
from ...training import runs
from ..tables.retrieval import queries
from ..tables.retrieval.rows import KEY, RetrievalEntry, RetrievalSection

#: the goal (docs/hunt.md): bpb at 16x within this fraction of the arm's own 1x ...
FLAT = queries.FLAT
#: ... and at least this exact match at 16x at every depth, on every held-out format and every task
RETRIEVES = queries.RETRIEVES


@dataclasses.dataclass(frozen=True)
class SweepResults:
    """What a sweep measured: its ``config`` (as JSON), table G's ``section`` of its copy scores, each
    task's ``entries`` (table G's entry type, the task in ``format``) and each arm's ``phases`` (the
    phase change's step per seed, None where it never came)."""

    config: dict
    section: RetrievalSection
    tasks: dict[str, list[RetrievalEntry]]
    phases: dict[str, list[int | None]]

    def scored(self) -> list[tuple[RetrievalEntry, str]]:
        """Every entry with the part it scores: a copy format's (the entry's ``format``), then each task's."""
        return ([(entry, entry.format) for entry in self.section.configs]
                + [(entry, task) for task, entries in self.tasks.items() for entry in entries])


@dataclasses.dataclass(frozen=True)
class ArmLine:
    """One arm under one pattern: the pooled line (:class:`~..tables.retrieval.queries.RetrievalLine`)
    of each thing scored (the trained format, each held-out format, then each task; None where it was
    not scored), its bpb at 1x and 16x (mean over seeds), phase changes, and the ``trained`` formats."""

    label: str
    pattern: str
    seeds: int
    lines: dict[str, Any]
    bpb: dict[int, float | None]
    phases: list[int | None]
    trained: tuple[str, ...]

    @property
    def ratios(self) -> tuple[float | None, float | None, float | None]:
        """bpb at 16x over 1x with its interval: paired (table G's :func:`~..tables.retrieval.queries.far_ratio`
        on the trained format's line, which carries the arm's bpb), no interval in results before it."""
        return queries.far_ratio(self.lines[self.trained[0]], FAR)

    @property
    def ratio(self) -> float | None:
        return self.ratios[0]

    def worst(self) -> list[float | None]:
        """The worst depth's exact match at 16x of each held-out format and task (None: not scored)."""
        return [queries.goal_worst([line], FAR) for name, line in self.lines.items() if name not in self.trained]

    def goal(self) -> bool:
        """bpb at 16x within :data:`FLAT` of its own 1x (:func:`~..tables.retrieval.queries.is_flat`),
        and every held-out format and task at :data:`RETRIEVES` or more at 16x at its own worst depth
        (:func:`~..tables.retrieval.queries.goal_worst`, table G's rule)."""
        (ratio, _, high) = self.ratios
        return queries.is_flat(ratio, high) and self.retrieves()

    def retrieves(self) -> bool:
        """The goal's retrieval half: every held-out format and task at :data:`RETRIEVES` or more at 16x
        at its own worst depth (:func:`~..tables.retrieval.queries.goal_worst`)."""
        worst = queries.goal_worst([line for name, line in self.lines.items() if name not in self.trained], FAR)
        return worst is not None and worst >= RETRIEVES

    def verdict(self) -> str:
        """The goal column: met, no, or undetermined where it retrieves and bpb's ratio has no interval
        to show flatness (:func:`~..tables.retrieval.queries.flatness`: not flat, not shown otherwise)."""
        if self.goal():
            return "**met**"
        undetermined = self.retrieves() and queries.flatness(self.ratios[0], self.ratios[2]) is None
        return "no: flatness undetermined (no interval)" if undetermined else "no"


#: the multiple the goal is judged at
FAR = 16


def _lines(section: RetrievalSection, entries: list[RetrievalEntry]) -> dict[tuple[str, str], Any]:
    """Table G's pooled lines of ``entries`` (every one in the trained group), by (label, pattern)."""
    sub = dataclasses.replace(section, configs=[dataclasses.replace(e, held_out=False) for e in entries])
    doc = SimpleNamespace(table=lambda key: sub if key == KEY else None)
    return {(line.label, line.pattern): line for line in queries.retrieval_lines(doc, "trained")}


def arm_lines(doc: SweepResults) -> list[ArmLine]:
    """One :class:`ArmLine` per arm and pattern, in the sweep's order."""
    g = doc.section
    formats = list(g.formats or ["tilde"]) + list(g.held_out or [])
    scored = {name: _lines(g, [e for e in g.configs if e.format == name]) for name in formats}
    scored |= {task: _lines(g, entries) for task, entries in doc.tasks.items()}
    out = []
    for label, pattern in dict.fromkeys((e.label, e.pattern) for e in g.configs):
        lines = {name: by.get((label, pattern)) for name, by in scored.items()}
        first = lines[formats[0]]
        out.append(ArmLine(label, pattern, first.seeds, lines, {m: first.bpb.get(m) for m in (1, FAR)},
                           doc.phases.get(label, []), tuple(g.formats or ["tilde"])))
    return out


def _percent(line, m: int) -> Number:
    """Exact match (%) at multiple ``m`` with its interval, and for a task with candidates (kvthread,
    ordinal) the guessing baseline and how often the answer is some candidate (``guess G, any C``);
    a dash where it was not scored."""
    if line is None or m not in line.accuracy:
        return Number("-", None)
    low, high = queries.interval(line, m)
    text = f"{100 * line.accuracy[m]:.0f} [{100 * low:.0f}-{100 * high:.0f}]"
    if m in line.guess:
        text += f" (guess {100 * line.guess[m]:.0f}, any {100 * line.candidate[m]:.0f})"
    return Number(text, line.accuracy[m])


def _phase(steps: list[int | None]) -> str:
    """The phase change's steps over seeds (``800``, ``800-1200``), and how many seeds never had it."""
    seen = [s for s in steps if s is not None]
    if not seen:
        return "never"
    text = f"{min(seen)}" if min(seen) == max(seen) else f"{min(seen)}-{max(seen)}"
    return text + (f" ({len(steps) - len(seen)} never)" if len(seen) < len(steps) else "")


def table(doc: SweepResults) -> Table:
    """The sweep's table: per arm and pattern, the seeds, the phase change (steps over seeds), bpb
    at 1x and 16x / 1x, exact match at 1x and 16x in the trained format, at 16x in each held-out
    format and each task (each with its 95 % interval), the worst depth at 16x of those, and the goal."""
    lines = arm_lines(doc)
    held = list(doc.section.held_out or [])
    names = [*held, *doc.tasks]
    header = (["arm", "pattern", "seeds", "phase change (step)", "bpb 1x", "bpb 16x / 1x [95 %]", "tilde 1x",
               "tilde 16x"]
              + [f"{name} 16x" for name in names] + ["worst depth 16x (%)", "goal"])
    rows = []
    for arm in lines:
        worst = [w for w in arm.worst() if w is not None]
        rows.append([arm.label, arm.pattern, str(arm.seeds), _phase(arm.phases),
                     Number("-" if arm.bpb[1] is None else f"{arm.bpb[1]:.3f}", arm.bpb[1]),
                     _ratio(arm),
                     _percent(arm.lines["tilde"], 1), _percent(arm.lines["tilde"], FAR),
                     *[_percent(arm.lines.get(n), FAR) for n in names],
                     Number(f"{100 * min(worst):.0f}" if worst else "-", min(worst) if worst else None),
                     arm.verdict()])
    best = {4: "min", 5: "min"} | {i: "max" for i in range(6, len(header) - 1)}
    return Table.of(header, rows, best, "lowest bpb and ratio, highest exact match")


def _ratio(arm: ArmLine) -> Number:
    """bpb 16x / 1x with its interval where it was measured paired."""
    ratio, low, high = arm.ratios
    return Number("-", None) if ratio is None else Number(ratio_with_interval(ratio, low, high), ratio)


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def summary(doc: SweepResults) -> str:
    """What the table holds and how it was measured, in a paragraph."""
    g, cfg = doc.section, doc.config
    stop = f", stopped by {cfg['stop']}" if cfg.get("stop") else ""
    return (f"Each arm trained on {_n(g.seeds, 'seed')} with `--mix {g.mix}` ({g.preset} preset, {g.steps} "
            f"steps{stop}, batch {g.batch}, lr {g.lr:g}), scored as table G scores: {_n(g.samples, 'needle')} at "
            f"each depth {', '.join(f'{d:g}' for d in g.depths)} % of each length "
            f"{', '.join(f'{m}x' for m in g.multiples)} the training length ({g.train_len} bytes), in the trained "
            "format and the held-out ones "
            f"({', '.join(g.held_out or [])}) and on the tasks {', '.join(doc.tasks) or 'none'} (a dash where a "
            f"task's documents do not fit), exact match (%) with its 95 % interval (over seeds where there are "
            f"several (table G's queries); beside a task with candidates, the exact match of guessing uniformly "
            f"among a document's candidates and how often the answer is any of them); {_bpb_protocol(g)}; the phase "
            f"change is the first validation where the training probe copies half its needles. The goal: bpb at "
            f"16x within {100 * FLAT:.0f} % of the arm's own 1x (the upper end of its interval: a ratio with none, "
            f"as on one document and one seed, is not flat, its flatness undetermined) and "
            f"at least {100 * RETRIEVES:.0f} % at 16x at every depth on every held-out format and task (each one's "
            "own worst depth).")


def _bpb_protocol(g: RetrievalSection) -> str:
    """What the bpb columns measure (table G's words: paired, or the paper's protocol before it)."""
    documents = queries.paired_documents(g)
    if not documents:
        return ("bpb by the paper's protocol as lexkit ran it before the paired measure (every 16x window opens "
                "on BOS, one 1x window in 16 does: docs/evaluation.md)")
    return ("bpb paired (lexkit.instruments.evaluate.paired): the same bytes at 1x and 16x, every window opening on "
            "a byte of its "
            f"document, on {count_range(documents, 'validation document')}, the ratio's 95 % interval over them "
            "(and over seeds)")


def to_json(doc: SweepResults) -> dict:
    """Every number of the sweep: its config, table G's section and each task's entries (every
    multiple, depth and seed), the phase changes, and the table as shown."""
    shown = table(doc)
    return {"config": doc.config, "retrieval": doc.section.to_json(),
            "tasks": {task: jsonable(entries) for task, entries in doc.tasks.items()}, "phases": doc.phases,
            "table": {"header": shown.header, "rows": shown.rows},
            "goal": {arm.label + " [" + arm.pattern + "]": arm.goal() for arm in arm_lines(doc)}}


def figure(doc: SweepResults, path: str | Path) -> None:
    """Each arm (and pattern) at its bpb 16x / 1x (x) against exact match at 16x (y) on the held-out
    formats pooled (circles, with their intervals) and on each task (other markers), the goal's
    corner marked by its two lines."""
    lines = arm_lines(doc)
    fig, (ax,) = plots.figure(9, 5.5)
    markers = ["o", "s", "^", "D", "v", "P"]
    held = list(doc.section.held_out or [])
    groups = [("held-out formats", held), *[(task, [task]) for task in doc.tasks]]
    named = []
    for (name, members), marker in zip(groups, markers):
        xs, ys, lows, highs = [], [], [], []
        for arm in lines:
            got = [arm.lines.get(m) for m in members if arm.lines.get(m) and FAR in arm.lines[m].accuracy]
            if arm.ratio is None or not got:
                continue
            y = sum(g.accuracy[FAR] for g in got) / len(got)
            low = min(queries.interval(g, FAR)[0] for g in got)
            high = max(queries.interval(g, FAR)[1] for g in got)
            xs.append(arm.ratio)
            ys.append(y)
            lows.append(max(0.0, y - low))
            highs.append(max(0.0, high - y))
            if name == "held-out formats":
                named.append((arm.ratio, y, f"{arm.label} [{arm.pattern}]"))
        if xs:
            ax.errorbar(xs, ys, yerr=[lows, highs], fmt=marker, capsize=3, label=name, alpha=0.8)
    ax.axhline(RETRIEVES, color="grey", linestyle=":", linewidth=1)
    ax.axvline(1 + FLAT, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("bpb at 16x over bpb at 1x (each arm's own)")
    ax.set_ylabel("exact match at 16x (all depths; bars: 95 % intervals)")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(f"{doc.config.get('name', 'sweep')}: flat in bpb (left of the line) and retrieving at 16x (above)",
                 fontsize=8)
    if named:
        plots.place_labels(ax, [(x, y) for x, y, _ in named], [label for _, _, label in named])
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=7, loc="best")
    plots.save(fig, path)


def write(doc: SweepResults, out: Path) -> None:
    """``sweep.md``, ``sweep.json`` and ``sweep.png`` in ``out`` (each written whole)."""
    blocks = [Heading(f"Sweep: {doc.config.get('name', 'sweep')}"), Text(summary(doc)), table(doc)]
    runs.atomic_write(out / "sweep.md", markdown(blocks))
    runs.atomic_write(out / "sweep.json", json.dumps(finite_or_none(to_json(doc)), indent=1) + "\n")
    figure(doc, out / "sweep.png")
