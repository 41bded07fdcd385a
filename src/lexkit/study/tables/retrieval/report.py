"""Table G's part of the report: section G (exact match by length beside bpb, its intervals, by
format, answer bits, the findings and the goal), from results.json through :mod:`.queries` alone."""

from __future__ import annotations

from ....core.notation import count, count_range, ratio_with_interval
from ....documents.blocks import Block, Figure, Heading, Number, Table, Text
from ...report.sections import listed
from ...report.tables import cell, percent
from ...schema import StudyResults
from . import queries
from .findings import (
    context_goal_finding,
    difference_findings,
    findings_lines,
    learning_findings,
    retrieval_findings,
)
from .rows import FINE_TUNE, METHOD, TRAINED, section


def blocks(doc: StudyResults) -> list[Block]:
    """Section G (use of context), when the study ran it."""
    g = section(doc)
    if not g:
        return []
    held = queries.held_out_scored(doc)
    formats = (f"in the trained format ({', '.join(g.formats or ['tilde'])}: `~` + {g.size} random letters, the "
               f"marker again) and in the held-out formats ({', '.join(g.held_out or [])}: never in training, "
               "lexkit.tasks.needles)" if held else f"({g.size} random letters after a marker, the marker again)")
    stop = doc.config.get("retrieval_stop")  # recorded only when the runs had a stop rule (lexkit.training.stopping)
    stopped = f", ended once the trained-format probe had converged (`{stop}`)" if stop else ""
    one = (" (one seed: its intervals count the needles alone; intervals over seeds need three, "
           "`make study-full`)" if g.seeds == 1 else "")
    out = [
        Heading("G. Use of context: retrieval at distance"),
        Text(f"Perplexity rewards a model that survives a long input; it cannot tell it from one that uses it. "
             f"Each row is a run trained with one recipe ({g.preset} preset, trained at {g.train_len} bytes for "
             f"{g.steps} steps{stopped}, batch {g.batch}, lr {g.lr:g}, `--mix {g.mix}`) on {g.seeds} "
             f"seed{'s' if g.seeds != 1 else ''}{one}, scored on copy needles {formats}, held-out values, validation "
             f"filler, {count(g.samples, 'document')} at each depth {', '.join(f'{d:g}' for d in g.depths)} % per "
             "format and seed: exact match (teacher-forced argmax, equal to greedy decoding on a byte model) at "
             "each multiple of the training length, the mean over seeds (lowest and highest seed in parentheses), "
             "beside the configuration's bpb. " + bpb_protocol(doc)
             + " A configuration **learned the skill** when its exact match on the "
             "trained format at 1x is at least 90 % (mean over seeds); one that did not is marked and not ranked "
             "past 1x." + (" How it **generalizes** is each held-out format's exact match at 1x, a number per "
                           "format (below), not a gate." if held else "")
             + methods_scored(g)),
        retrieval_table(doc),
        Figure("retrieval_scatter.png", "bpb against retrieval at 16x"),
        Figure("retrieval_heatmap.png", "exact match by configuration and length"),
        Text("95 % intervals over seeds (Student t on the seeds' exact match, each over the depths and the "
             "formats of a line: where another training seed could land; never narrower than the needle "
             "interval below), and the worst depth at the longest length (each format's own worst depth, the lowest "
             "of those: the goal's rule, never the formats averaged at a depth). Every finding below rests on these "
             "(on the needle interval where a row has one seed): a difference is stated only where two of them "
             "are apart."),
        seed_interval_table(doc),
        Text("For comparison, 95 % intervals over needles (Wilson, the needles of every seed pooled as if one "
             "run: the needle sampling alone, which ignores how much seeds differ), with the needles per length:"),
        needle_interval_table(doc),
    ]
    if held:
        out += [Text("By format, each row under its first pattern (exact match %, pooled over seeds and depths):"),
                by_format_table(doc)]
    out += [Text("Answer bits per byte (teacher-forced; a copying model scores near 0, a uniform guess log2 of "
                 "the alphabet: 4.70 over letters, 4.00 over hex digits):"),
            answer_bits_table(doc)]
    learned = "Learned the skill (the trained format at 1x, at least 90 %)"
    out += listed(learned + (" and how each generalizes (each held-out format at 1x):" if held else ":"),
                  learning_findings(doc))
    out += listed("Format-bound (the trained format retrieved, the held-out ones clearly not):",
                  findings_lines(doc))
    out += listed("Differences between the rows that learned, " + ("held-out formats" if held else "trained format")
                  + " (ordered by exact match):", difference_findings(doc))
    out += listed("Where each configuration that loses the skill stops retrieving (below 90 % over all depths):",
                  retrieval_findings(doc))
    goal = context_goal_finding(doc)
    return out + ([Text(goal)] if goal is not None else [])


def _lines(doc: StudyResults) -> list[queries.RetrievalLine]:
    """Table G's lines: trained and held-out of each configuration together (trained alone in a
    study that scored no held-out format)."""
    return queries.retrieval_lines(doc, None if queries.held_out_scored(doc) else "trained")


def _formats(line: queries.RetrievalLine) -> str:
    return f"{line.group} ({', '.join(line.formats)})" if line.group == "held-out" else line.group


def _exact(line: queries.RetrievalLine, m: int) -> Number:
    """Exact match (%) at multiple ``m``, the mean over seeds, with the lowest and highest seed's when
    there are several; not ranked past 1x when the configuration did not learn the skill."""
    acc = line.accuracy.get(m)
    if acc is None:
        return Number("n/a", None)
    low, high = line.spread.get(m, (acc, acc))
    text = f"{100 * acc:.0f}" + (f" ({100 * low:.0f}-{100 * high:.0f})" if line.seeds > 1 else "")
    return Number(text, round(100 * acc) / 100 if line.learned or m == min(line.accuracy) else None)


def retrieval_table(doc: StudyResults) -> Table:
    """G: exact match (%) of copy needles at every multiple of the training length, in the trained
    format and (a second line) the held-out ones, the mean over seeds (the lowest and highest seed in
    parentheses), whether the configuration learned the skill, then bpb at 1x and 16x and their
    ratio: paired (the same bytes, every window opening on a byte of its document,
    :mod:`lexkit.instruments.evaluate.paired`)
    with its 95 % interval, or in results measured before it the ratio of the paper's protocol's
    two bpb. A configuration that did not learn is not ranked past 1x."""
    ms, bms = section(doc).multiples, section(doc).bpb_multiples
    paired = bool(queries.paired_documents(section(doc)))
    header = (["configuration", "pattern", "formats", "seeds", "learned (trained ≥ 90 % at 1x)"]
              + [f"exact {m}x (%)" for m in ms]
              + [f"bpb {m}x" for m in bms]
              + [f"bpb {bms[-1]}x / {bms[0]}x" + (" [95 %], paired" if paired else "")])
    rows = []
    for line in _lines(doc):
        b = [line.bpb.get(m) for m in bms]
        rows.append([line.label, line.pattern, _formats(line), str(line.seeds), "yes" if line.learned else "no"]
                    + [_exact(line, m) for m in ms] + [cell(v) for v in b] + [_ratio(line, bms[-1])])
    first = 5
    best = {first + i: "max" for i in range(len(ms))} | {first + len(ms) + i: "min" for i in range(len(bms) + 1)}
    return Table.of(header, rows, best, "highest exact match and lowest bpb (and ratio) per column marked; "
                    "configurations that did not learn at 1x are not ranked past it")


def bpb_protocol(doc: StudyResults) -> str:
    """What table G's bpb columns measure, in words (results measured before the paired measure
    used the paper's protocol, whose longest windows all open on BOS)."""
    documents = queries.paired_documents(section(doc))
    if not documents:
        return ("Its bpb is the paper's protocol as lexkit ran it before the paired measure: every 16x window "
                "opens on a document's BOS, one 1x window in 16 does, so the ratio also measures how a model "
                "takes a BOS at key 0 (docs/evaluation.md).")
    over = count_range(documents, "validation document")
    return ("Its bpb is paired (lexkit.instruments.evaluate.paired): the same bytes at 1x and 16x, every window "
            "opening on a byte of "
            f"its document as a training window does (never on BOS), over {over}; the ratio's "
            "95 % interval is over those documents (over seeds too, where a row has several), and flat means its "
            "upper end is within the goal's 3 %.")


def _ratio(line: queries.RetrievalLine, m: int) -> Number:
    """bpb at ``m`` over 1x (:func:`queries.far_ratio`), with its interval where paired."""
    ratio, low, high = queries.far_ratio(line, m)
    return cell(None) if ratio is None else Number(ratio_with_interval(ratio, low, high, 2), round(ratio, 2))


def _interval(line: queries.RetrievalLine, m: int, interval: tuple[float, float] | None) -> str:
    if m not in line.accuracy:
        return "n/a"
    if interval is None:
        return f"{100 * line.accuracy[m]:.0f} (one seed)"
    return f"{100 * line.accuracy[m]:.0f} [{100 * interval[0]:.0f}-{100 * interval[1]:.0f}]"


def seed_interval_table(doc: StudyResults) -> Table:
    """G's 95 % intervals over seeds (:attr:`.queries.RetrievalLine.over_seeds`: Student t on each
    seed's exact match), what every finding rests on, and the worst depth at the longest multiple (the
    goal's, :func:`.queries.goal_worst`)."""
    ms = section(doc).multiples
    header = ["configuration", "pattern", "formats", "seeds"] + [f"{m}x [95 % over seeds]" for m in ms] + [
        f"worst depth {ms[-1]}x"]
    rows = [[line.label, line.pattern, _formats(line), str(line.seeds)]
            + [_interval(line, m, line.over_seeds.get(m)) for m in ms] + [percent(queries.goal_worst([line], ms[-1]))]
            for line in _lines(doc)]
    return Table.of(header, rows)


def needle_interval_table(doc: StudyResults) -> Table:
    """G's 95 % intervals over needles (:attr:`.queries.RetrievalLine.over_needles`: Wilson on the
    needles of every seed pooled, the needle sampling alone), with the needles per length."""
    ms = section(doc).multiples
    header = ["configuration", "pattern", "formats", "needles"] + [f"{m}x [95 % over needles]" for m in ms]
    rows = [[line.label, line.pattern, _formats(line), str(line.needles.get(ms[0], 0))]
            + [_interval(line, m, line.over_needles.get(m)) for m in ms] for line in _lines(doc)]
    return Table.of(header, rows)


def by_format_table(doc: StudyResults) -> Table:
    """G by format: each scheme row's exact match (%) in every format scored, pooled over seeds and
    depths, under its first pattern."""
    g = section(doc)
    ms = g.multiples
    header = ["configuration", "pattern", "format", "held out"] + [f"{m}x" for m in ms]
    acc: dict[tuple, list[int]] = {}
    for e in g.configs:
        if e.origin != TRAINED:
            continue
        for c in e.cells:
            counts = acc.setdefault((e.label, e.pattern, e.format, e.held_out, c.length // g.train_len), [0, 0])
            counts[0], counts[1] = counts[0] + c.samples, counts[1] + c.correct
    keys = list(dict.fromkeys(k[:4] for k in acc))
    first = {k[0]: k[1] for k in reversed(keys)}
    rows = [list(k[:3]) + ["yes" if k[3] else "no"] + [percent(acc[(*k, m)][1] / acc[(*k, m)][0])
                                                      if (*k, m) in acc else percent(None) for m in ms]
            for k in keys if first[k[0]] == k[1]]
    return Table.of(header, rows, "max", "highest exact match per column marked")


def answer_bits_table(doc: StudyResults) -> Table:
    """G, continuous: teacher-forced bits per answer byte by multiple, pooled over seeds (and the
    held-out formats on their own line; chance: log2 of the alphabet, 4.70 for letters)."""
    ms = section(doc).multiples
    header = ["configuration", "pattern", "formats"] + [f"{m}x" for m in ms]
    rows = [[line.label, line.pattern, _formats(line)] + [cell(line.answer_bits.get(m), digits=2) for m in ms]
            for line in _lines(doc)]
    return Table.of(header, rows, "min", "lowest answer bits per column marked")


def methods_scored(g) -> str:
    """What table G says of table E's methods on its rope row: nothing when none was scored
    (``--retrieval-methods`` off), and the fine-tunes only when they ran."""
    origins = {c.origin for c in g.configs}
    if METHOD not in origins and FINE_TUNE not in origins:
        return ""
    tuned = f"; the fine-tunes run {g.finetune_steps} steps at 4x with the same mix" if FINE_TUNE in origins else ""
    return (f" On the rope row's seed-0 run, table E's methods (scalings at x{max(g.multiples)}, ReRoPE, log-n, "
            f"sinks{tuned}).")

