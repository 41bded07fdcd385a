"""Report tables from results.json alone: seeds aggregate to mean ± sample standard deviation,
unavailable cells read n/a, and Table D's ratios follow from the bpb cells; report.html holds the
same tables and figures with nothing fetched from elsewhere, the best cell of each column marked."""

import base64
import dataclasses
import itertools
import math
import re
import shutil
import struct
import subprocess
import types
from html.parser import HTMLParser

import pytest

from lexkit.core.notation import length_label, multiple, number, signed
from lexkit.documents.blocks import Table
from lexkit.documents.render import markdown as render_markdown
from lexkit.study import document, read, write_report
from lexkit.study.report import length_table, pattern_table, provenance_table
from lexkit.study.results import principles, seed_mean
from lexkit.study.tables.retrieval.findings import retrieval_findings
from lexkit.study.tables.retrieval.queries import FLAT, RETRIEVES, context_goal, retrieval_lines, stops_at
from lexkit.study.tables.retrieval.report import answer_bits_table, retrieval_table
from study_results import MULTIPLES, PATTERNS, RETRIEVAL, RETRIEVAL_DEPTHS, TRAIN_LEN, study_results


def markdown(results) -> str:
    """report.md of a results.json (its parsed JSON)."""
    return render_markdown(document(results))


def run(scheme, seed, bpb_by_length, relative=True):
    results = [{"length": n, "pattern": p, "bpb": v, "ppl": None if v is None else math.exp(v * math.log(2)),
                "bytes": 10}
               for (p, n), v in bpb_by_length.items()]
    return {"scheme": scheme, "seed": seed, "relative": relative, "family": "bias" if relative else "absolute",
            "run": "runs/x",
            "eval": {"results": results, "by_position": [], "documents": 2, "bytes_per_document": 64},
            "resolution": [], "principles": {"order_variance": 0.5, "translation": 0.0}}


def results(runs):
    return {"train_len": 16, "lengths": [16, 64, 256], "patterns": ["causal", "window:16"], "runs": runs,
            "resolution_lengths": [16], "analytic": [], "config": {"seeds": 2, "resolution_texts": 1},
            "data": {"spec": "toy", "fingerprint": {"files": 1, "bytes": 10}},
            "model": {"n_layers": 1, "d_model": 8, "n_heads": 2},
            "params": 100, "train": {"steps": 1, "batch": 1, "lr": 0.1}, "wall_seconds": 1.0,
            "work": {"ran": 1, "cached": 0}, "lexkit": "0", "torch": "0"}


def test_seeds_give_mean_and_sample_std():
    a = run("alibi", 0, {("causal", 16): 2.0, ("causal", 64): 2.0, ("causal", 256): None,
                         ("window:16", 64): 1.0, ("window:16", 256): 1.0})
    b = run("alibi", 1, {("causal", 16): 3.0, ("causal", 64): 4.0, ("causal", 256): None,
                         ("window:16", 64): 1.5, ("window:16", 256): 2.0})
    res = results([a, b])
    header, rows = length_table(read(res))
    assert header == ["scheme", "16 (1x)", "64 (4x)", "256 (16x)"]
    assert rows == [["alibi", f"2.500 ± {math.sqrt(0.5):.3f}", f"3.000 ± {math.sqrt(2.0):.3f}", "n/a"]]
    _, rows_b = pattern_table(read(res))
    assert rows_b[1] == ["alibi", "window:16", f"1.250 ± {math.sqrt(0.125):.3f}", f"1.500 ± {math.sqrt(0.5):.3f}"]
    p = principles(read(res))[0]
    assert p.ratio_4x == 3.0 / 2.5 and p.ratio_16x is None and p.best_pattern_16x == "window:16"
    assert "mean ± std over seeds" in markdown(res)


def test_absolute_schemes_are_left_out_of_pattern_table():
    res = results([run("sinusoidal", 0, {("causal", 64): 5.0}, relative=False), run("rope", 0, {("causal", 64): 3.0})])
    _, rows = pattern_table(read(res))
    assert {r[0] for r in rows} == {"rope"}


def test_length_labels_share_one_format():
    assert [multiple(n, 16) for n in (8, 16, 256)] == ["0.5x", "1x", "16x"]
    assert multiple(33, 32) == "1.03x" and multiple(7, 32) == "0.219x"  # three significant digits, both sides of 1x
    assert length_label(7, 32) == "7 (0.219x)" and length_label(7, None) == "7"  # one format, with or without
    assert multiple(1, 1024) == "0.000977x" and length_label(64, 16) == "64 (4x)"
    # exact when whole, every digit of the whole part (three significant digits read 1020x, 4100x)
    assert [multiple(n, 64) for n in (65536, 262144, 65600)] == ["1024x", "4096x", "1025x"]
    assert multiple(64 * 1024 + 32, 64) == "1024x" and multiple(1000001, 1) == "1000001x"


@pytest.mark.parametrize("x, text", [
    (0.97, "97"), (0.998, "99.8"), (0.9996, ">99.9"), (0.995, "99.5"), (1.0, "100"),
    (0.002, "0.2"), (0.0004, "<0.1"), (0.0, "0"), (0.5, "50"), (0.954, "95"),
])
def test_percentages_never_round_to_0_or_100(x, text):
    """'99 [95-100]' hid 99.8: a proportion is whole unless rounding would make it read 0 or 100."""
    from lexkit.core.notation import percent as percent_text
    from lexkit.study.report.tables import percent

    assert percent_text(x) == text
    assert percent(x).text == text


def test_a_value_that_rounds_to_zero_has_no_sign():
    assert number(-0.0001) == "0.000" and number(-0.00004, digits=4) == "0.0000"
    assert number(-0.002) == "-0.002" and number(12345.6) == "1.23e+04"
    assert number(0.00096, small=True) == "9.60e-04" and number(0.00096) == "0.001"  # resolution spans decades
    assert signed(-0.0001) == "0.000" and signed(0.012) == "+0.012" and signed(-0.12) == "-0.120"
    # the fixture's translation change is -1e-5 and -2e-5 over two seeds: shown as 0.0000
    assert "| -0.0" not in markdown(study_results())


def test_seeds_plot_as_one_line_of_means():
    assert seed_mean([(2, 1.0), (1, 3.0), (2, 2.0), (3, None)]) == [(1, 3.0), (2, 1.5)]


class Page(HTMLParser):
    """The parts of report.html a reader relies on: images, links, ids, tables (cell text and
    whether a cell is marked best), and every URL-bearing attribute."""

    def __init__(self):
        super().__init__()
        self.images, self.links, self.ids, self.urls, self.tags = [], [], set(), [], []
        self.tables, self._cell = [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        self.ids |= {attrs["id"]} if "id" in attrs else set()
        self.urls += [v for k, v in attrs.items() if k in ("src", "href", "srcset", "action", "data") and v]
        if tag == "img":
            self.images.append(attrs["src"])
        elif tag == "a":
            self.links.append(attrs.get("href", ""))
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ["", "best" in (attrs.get("class") or "").split()]

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[0] += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(tuple(self._cell))
            self._cell = None


def placeholder_plots(module, numbers):
    """``module`` (lexkit.documents.plots) whose ``save`` writes a placeholder for the figure, built but
    not laid out or rendered (matplotlib's layout and PNG encoding, about 0.2 s a figure): each its own
    (``numbers``), so that an image embedded in another's place shows."""
    proxy = types.ModuleType(module.__name__)
    proxy.__dict__.update(vars(module))
    proxy.save = lambda fig, stream: stream.write(b"unrendered figure %d" % next(numbers))
    return proxy


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The fixture study's report directory and its report.html, parsed (written once). Table G's two
    figures are rendered here; the grid's five and table E's are built and written as placeholders, not
    laid out or rendered (test_no_figure_hides_a_curve_behind_another_or_its_legend draws and lays out
    each of those six, on twelve schemes; their PNG is written by the same lexkit.documents.plots.save
    as table G's here)."""
    from lexkit.study.report import figures as grid
    from lexkit.study.tables.extension import figures as extension

    out = tmp_path_factory.mktemp("report")
    numbers = itertools.count()
    with pytest.MonkeyPatch.context() as patch:
        for module in (grid, extension):
            patch.setattr(module, "plots", placeholder_plots(module.plots, numbers))
        write_report(study_results(), out)
    page = Page()
    page.feed((out / "report.html").read_text())
    return out, page


@pytest.mark.xdist_group("report_html")  # the two share the module's one written report on one worker
def test_html_report_is_self_contained_and_holds_every_table(written):
    tmp_path, page = written
    res = study_results()
    text = (tmp_path / "report.html").read_text()
    md = (tmp_path / "report.md").read_text()
    # every figure of report.md is embedded, as the PNG file written beside it
    figures = re.findall(r"!\[.*?\]\(([\w.]+\.png)\)", md)
    assert len(page.images) == len(figures) == 8
    for src, name in zip(page.images, figures):
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]) == (tmp_path / name).read_bytes()
    rendered = [name for name in figures if (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"]
    assert rendered == ["retrieval_scatter.png", "retrieval_heatmap.png"]  # the others: placeholders (see written)
    # nothing fetched from elsewhere: no URL but data: and #anchors, no script, stylesheet or font link
    assert "http://" not in text and "https://" not in text
    assert all(u.startswith(("data:", "#")) for u in page.urls)
    assert not {"script", "link", "iframe", "object"} & set(page.tags)
    # every table of report.md, cell for cell, from the same data
    tables = [b for b in document(res) if isinstance(b, Table)]
    assert len(page.tables) == len(tables) == md.count("\n| --- |") == 14
    for table, parsed in zip(tables, page.tables):
        assert [c[0] for c in parsed[0]] == table.header
        assert [[c[0] for c in row] for row in parsed[1:]] == table.rows
        assert "| " + " | ".join(table.header) + " |" in md
    # the table of contents links every section, and every #link lands on an id
    assert all(link[1:] in page.ids for link in page.links if link.startswith("#"))
    assert len([h for h in page.links if h != "#contents"]) == md.count("\n## ")


@pytest.mark.xdist_group("report_html")
def test_html_marks_the_best_value_of_each_column(written):
    _, page = written
    marked = [[[c[1] for c in row] for row in t[1:]] for t in page.tables]
    # A (bpb): alibi (2.0625 mean, formula in the fixture) beats rope (2.3125 and up) at every length
    assert marked[0] == [[False] + [True] * 5, [False] * 6]
    # B: the lowest of four rows per column is alibi under window:16 (2.0 against 2.0625, 2.25, ...)
    assert [row[2:] for row in marked[2]] == [[False] * 3, [True] * 3, [False] * 3, [False] * 3]
    # C (resolution, highest marked): analytic rope (0.01 above alibi) wins; empirical ties mark all
    assert [row[2] for row in marked[3]] == [False, False, True, True] and all(row[3] for row in marked[3])
    # D: order variance and translation are unmarked whatever their values
    assert not any(row[1] or row[2] for row in marked[4])
    # cells that read the same tie (0.010 and 0.010 differ in the 17th digit): both marked
    assert [row[7] for row in marked[4]] == [True, True]
    # the paper's Table 3 (highest resolution): xpos + bca and xpos tie at 1024, xpos + bca alone at 2048
    assert [row[1:] for row in marked[-2]] == [[False, False]] * 3 + [[True, True], [True, False]]
    assert not any(any(row) for row in marked[-1])  # provenance: nothing scored


def test_provenance_of_results_json_is_shown(tmp_path):
    res = study_results()
    rows = dict(provenance_table(read(res)).rows)
    assert rows["device"] == "type cpu, name x86_64, count 1" and rows["backend"] == "none"
    assert rows["git_commit"] == "c19629d" and rows["world_size"] == "1"
    del res["provenance"]  # a study written before provenance was recorded: the table still renders
    assert "git_commit" not in dict(provenance_table(read(res)).rows)


def test_provenance_lists_the_attention_kernels_the_evaluations_ran():
    runs = [run("alibi", 0, {("causal", 16): 1.0, ("causal", 64): 1.1, ("window:16", 256): 1.2}),
            run("alibi", 1, {("causal", 16): 1.0})]
    for row, kernel in zip(runs[0]["eval"]["results"], ["dense", "flex:128x64/2", "chunked"]):
        row["kernel"] = kernel
    runs[1]["eval"]["results"][0]["kernel"] = "dense"
    assert dict(provenance_table(read(results(runs))).rows)["attention kernels"] == (
        "dense at 16; flex:128x64/2 at 64; chunked at 256")
    for row in runs[0]["eval"]["results"] + runs[1]["eval"]["results"]:
        del row["kernel"]  # results recorded before rows carried the kernel: no row
    assert "attention kernels" not in dict(provenance_table(read(results(runs))).rows)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs chromium (apt-get install chromium)")
def test_html_report_renders_in_headless_chromium(tmp_path):
    """The page as a browser lays it out: the DOM after loading has every image decoded (a
    natural width) and every table (checked by the fast test above through html.parser)."""
    write_report(study_results(), tmp_path)
    shot = tmp_path / "report.png"
    proc = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                           "--window-size=1280,2400", (tmp_path / "report.html").as_uri()],
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-500:]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (1280, 2400)


# -- table G: use of context -------------------------------------------------------------------------
def test_table_g_holds_the_stored_retrieval_beside_bpb():
    res = read(study_results())
    header, rows = retrieval_table(res)
    assert header[:5] == ["configuration", "pattern", "formats", "seeds", "learned (trained ≥ 90 % at 1x)"]
    assert header[5:10] == [f"exact {m}x (%)" for m in MULTIPLES] and header[10:] == ["bpb 1x", "bpb 16x",
                                                                                      "bpb 16x / 1x"]
    for row, ((label, _, pattern), (acc, one, far)) in zip(rows, RETRIEVAL.items()):
        means = [sum(acc(m, d) for d in RETRIEVAL_DEPTHS) / len(RETRIEVAL_DEPTHS) for m in MULTIPLES]
        assert row == [label, pattern, "trained", "1", "yes"] + [f"{100 * v:.0f}" for v in means] + [
            f"{one:.3f}", f"{far:.3f}", f"{far / one:.2f}"]
    _, bits = answer_bits_table(res)
    assert bits[0] == ["rope", "causal", "trained", "0.00", "3.60", "4.00", "4.00", "4.00"]  # 4 x (1 - exact)
    # worst depth: the lowest per-depth exact match, not the mean
    alibi = next(r for r in retrieval_lines(res) if r.label == "alibi")
    assert alibi.worst_depth[16] == 0.9 and alibi.accuracy[16] == pytest.approx(2.9 / 3)


def test_findings_say_where_each_configuration_stops_retrieving():
    rows = {(r.label, r.pattern): r for r in retrieval_lines(read(study_results()))}
    assert stops_at(rows[("rope", "causal")]) == 2 and stops_at(rows[("YaRN x16", "causal")]) == 16
    assert stops_at(rows[("alibi", "causal")]) is None  # 97 % at 16x over all depths: keeps the skill
    never = dataclasses.replace(rows[("rope", "causal")], accuracy={1: 0.2, 2: 0.0})
    assert stops_at(never) == 1
    res = study_results()
    lines = retrieval_findings(read(res))
    assert lines == [
        "rope (causal): retrieves 100 % at 1x, stops at 2x (10 %); 0 % at 16x, where its bpb is 4.000.",
        "rope (window:16): retrieves 100 % at 1x, stops at 2x (33 %); 0 % at 16x, where its bpb is 2.040.",
        "YaRN x16 (causal): retrieves 100 % at 1x, stops at 16x (87 %); 87 % at 16x, where its bpb is 2.400.",
    ]
    rope = res["retrieval"]["configs"][0]  # below 90 % from 1x on: its best length, or nothing at all
    for c in rope["cells"]:
        c["correct"] = 5 if c["length"] == 4 * res["retrieval"]["train_len"] else 0
    never = "rope (causal): never reaches 90 % (best 50 % at 4x); 0 % at 16x"
    assert retrieval_findings(read(res))[0].startswith(never)
    for c in rope["cells"]:
        c["correct"] = 0
    assert retrieval_findings(read(res))[0].startswith("rope (causal): retrieves nothing at any length; 0 % at 16x")


def _paired(res, half=0.0005, documents=10):
    """Every 16x row of table G measured paired: its ratio bpb 16x / 1x with an interval of +-``half``."""
    for c in res["retrieval"]["configs"]:
        one = next(r["bpb"] for r in c["rows"] if r["multiple"] == 1)
        for r in c["rows"]:
            if r["multiple"] == 16:
                ratio = r["bpb"] / one
                r.update(ratio=ratio, ratio_low=ratio - half, ratio_high=ratio + half, documents=documents)
    return res


def test_the_goal_needs_flat_bpb_and_retrieval_at_every_depth():
    res = _paired(study_results())
    goal = context_goal(read(res))
    # alibi: 2.16 / 2.1 = 1.0286, its interval's top 1.0291 <= 1.03, and 90 % at its worst depth at 16x: met
    # (both bounds inclusive)
    assert goal.met == ["alibi (causal)"] and goal.nearest.line.label == "alibi"
    scored = {(r.line.label, r.line.pattern): r for r in goal.scored}
    assert scored[("rope", "window:16")].flat and not scored[("rope", "window:16")].met  # flat, retrieves 0 %
    assert not scored[("YaRN x16", "causal")].flat  # 2.4 / 2.2 = 1.09
    assert (FLAT, RETRIEVES) == (0.03, 0.9)
    assert "**met** by alibi (causal)" in markdown(res)

    # without alibi: nothing meets it. The nearest is the least of the larger of the two relative
    # shortfalls: rope under the window is flat (0) but retrieves 0 % (1 - 0/0.9 = 100 % short); YaRN is
    # 1.09 / 1.03 - 1 = 5.8 % short of flat and 1 - 0.6/0.9 = 33 % short of retrieving: YaRN, 33 % (a
    # window is flat because it never looks past W: flatness is not a gate retrieval passes through)
    res["retrieval"]["configs"] = [c for c in res["retrieval"]["configs"] if c["label"] != "alibi"]
    goal = context_goal(read(res))
    window = {(r.line.label, r.line.pattern): r for r in goal.scored}[("rope", "window:16")]
    assert window.shortfall == 1.0 and window.bpb_shortfall == 0.0
    assert goal.met == [] and goal.nearest.line.label == "YaRN x16"
    assert goal.nearest.shortfall == pytest.approx(1 - 0.6 / 0.9)
    assert goal.nearest.bpb_shortfall == pytest.approx(goal.nearest.ratio_high / 1.03 - 1)  # its interval's top
    assert goal.best_retrieval.line.label == "YaRN x16" and goal.best_retrieval.worst == 0.6
    text = markdown(res)
    assert ("**not met**. Nearest, by the larger of its two relative shortfalls (bpb's ratio, or its interval's "
            "top, over 1.03; the worst depth's exact match under 90 %), 33 % short: YaRN x16 (causal)") in text
    assert "30 points short of 90 % at its worst depth" in text
    assert "Best retrieval at 16x whatever its bpb" not in text  # the nearest is the best retrieval here
    # YaRN keeps 90 % at every depth up to 8x (60 % at depth 0 at 16x); rope under causal only at 1x
    assert goal.longest_reach.line.label == "YaRN x16" and goal.longest_reach.reach == 8
    assert "at least 90 % at every depth: 8x (YaRN x16, causal)" in text

    # nothing flat either: the nearest is still the least of the larger shortfalls, computed here from
    # each line's ratio and worst depth, and its bpb gap is stated
    for c in res["retrieval"]["configs"]:
        for r in c["rows"]:
            if r["multiple"] == 16:
                r["bpb"] *= 1.5
    goal = context_goal(read(_paired(res)))
    by_hand = {s.line.label + s.line.pattern: max(max(0.0, (s.ratio + 0.0005) / 1.03 - 1), max(0.0, 1 - s.worst / 0.9))
               for s in goal.ranked}
    assert not any(s.flat for s in goal.ranked)
    assert goal.nearest.line.label + goal.nearest.line.pattern == min(by_hand, key=by_hand.get)
    assert f"bpb {100 * (goal.nearest.ratio - 1):.1f} % above its 1x" in markdown(res)


def test_a_ratio_without_an_interval_is_not_flat_but_undetermined():
    """docs/evaluation.md: a row is flat only when its interval's upper end is within 3 %. is_flat read
    the bare ratio where there was no interval (one document, or bpb before the paired measure), so
    alibi's 2.16 / 2.1 = 1.0286 met the goal unshown; a ratio above the bound is not flat either way."""
    res = study_results()  # bpb only, no paired interval
    goal = context_goal(read(res))
    alibi = {s.line.label: s for s in goal.scored}["alibi"]
    assert goal.met == [] and not alibi.flat and alibi.ratio == pytest.approx(2.16 / 2.1) and alibi.ratio_high is None
    assert goal.nearest.line.label == "alibi"  # its shortfall, from the point value, is still the least
    assert "bpb 1.029x its 1x with no interval: flatness undetermined, so not flat" in markdown(res)
    from lexkit.study.tables.retrieval.queries import flatness, is_flat

    assert (flatness(1.0286, None), is_flat(1.0286, None)) == (None, False)  # undetermined: not flat
    assert (flatness(1.0286, 1.0291), flatness(1.0286, 1.031), flatness(1.031, None)) == (True, False, False)
    assert flatness(None, None) is None and is_flat(1.03, 1.03) and not is_flat(0.5, None)


def test_a_study_without_table_g_reports_no_section_g():
    res = study_results()
    del res["retrieval"]
    assert context_goal(read(res)) is None and retrieval_lines(read(res)) == []
    assert "## G." not in markdown(res)


def test_scatter_labels_never_cover_each_other(monkeypatch):
    """Table G's scatter printed labels on top of each other where points coincide (rope
    window:64 and bca:64, the sinks pair): every label's box is now clear of every other's and
    inside the axes, with four configurations on one point and two more close by."""
    import copy

    from matplotlib.text import Text

    from lexkit.documents import plots

    results = study_results()
    g = results["retrieval"]
    base = next(c for c in g["configs"] if c["label"] == "alibi")  # retrieves at 16x: labelled
    for pattern in ("bca:16", "sinks:16", "sinks:16,pos=cache"):  # the same numbers: one point
        twin = copy.deepcopy(base)
        twin["pattern"] = pattern
        for row in twin["rows"]:
            row["pattern"] = pattern
        g["configs"].append(twin)
    for label, shift in (("alibi near", 0.002), ("alibi nearer", -0.001)):  # close by
        near = copy.deepcopy(base)
        near["label"] = label
        for row in near["rows"]:
            row["bpb"] = None if row["bpb"] is None else row["bpb"] + shift
        g["configs"].append(near)
    from lexkit.study.tables.retrieval import figures

    drawn = []
    monkeypatch.setattr(plots, "save", lambda fig, path: drawn.append(fig))
    figures.retrieval_scatter(read(results), "unused.png")
    (fig,) = drawn
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    (ax,) = fig.axes
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()
    boxes = []
    for t in ax.texts:  # the text alone, where it is drawn (an annotation's line left out)
        t.update_positions(renderer)
        boxes.append(Text.get_window_extent(t, renderer))
    assert len(boxes) >= 6 and sum(t.get_text().startswith("alibi [") for t in ax.texts) == 4
    frame = ax.get_window_extent(renderer)
    for i, a in enumerate(boxes):
        assert frame.contains(a.x0, a.y0) and frame.contains(a.x1, a.y1), ax.texts[i].get_text()
        for j in range(i):
            assert not a.overlaps(boxes[j]), (ax.texts[i].get_text(), ax.texts[j].get_text())


def test_no_figure_hides_a_curve_behind_another_or_its_legend(monkeypatch):
    """Once a study had nine schemes the legend sat on the curves it names, and two schemes with
    the same numbers (window and bca past the training length) drew one line: on twelve schemes
    with identical numbers, every line figure's legend lies outside every axes, and no two series
    of a panel share colour, line style and marker."""
    import copy
    import json
    from pathlib import Path

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from lexkit.documents import plots

    doc = json.loads((Path(__file__).parent / "fixtures" / "safety_net" / "results.json").read_text())
    names = [f"scheme{i}" for i in range(12)]
    doc["runs"] = [dict(copy.deepcopy(doc["runs"][0]), scheme=name) for name in names]
    from lexkit.study.tables.extension.figures import extension
    curve = next(iter(doc["analytic_curves"]["curves"].values()))
    doc["analytic_curves"]["curves"] = {name: curve for name in names}
    drawn = {}
    monkeypatch.setattr(plots, "save", lambda fig, path: drawn.__setitem__(path, fig))
    from lexkit.study.report import figures as grid

    for name in ("bpb_by_length", "analytic_curves", "resolution_per_layer", "entropy_by_length",
                 "loss_by_position"):
        getattr(grid, name)(read(doc), name)
    extension(read(doc), "extension")
    assert set(drawn) == {"bpb_by_length", "analytic_curves", "resolution_per_layer", "entropy_by_length",
                          "loss_by_position", "extension"}
    for name, fig in drawn.items():
        renderer = FigureCanvasAgg(fig).get_renderer()
        fig.draw_without_rendering()
        (box,) = [legend.get_window_extent(renderer) for legend in fig.legends]
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), name
            styles = [(line.get_color(), line.get_linestyle(), line.get_marker()) for line in ax.get_lines()
                      if not line.get_label().startswith("_")]
            assert len(styles) >= 2 and len(set(styles)) == len(styles), (name, styles)
        assert len(fig.legends[0].get_texts()) >= 2


def test_table_c_says_a_layouts_resolution_is_a_mean_and_shows_each_layer():
    """Table C read one number for a layout, the mean over its layers, which hid the global layer
    (hwfa read 0.040 under every pattern): the row says it is a mean, and a table beside it gives
    each layer's R, analytic (as stored) and empirical (mean over seeds)."""
    import study_results as fixture
    from lexkit.study.report.tables import layer_resolution_table, resolution_table

    res = study_results()
    for seed in (0, 1):
        layout = dict(fixture.run("rope", seed), scheme="hwfa:W=8", family=None, layered=True)
        layout["resolution"] = [{"length": n, "pattern": p, "resolution": 0.5, "per_layer": [0.9 - 0.1 * seed, 0.1]}
                                for p in PATTERNS for n in (TRAIN_LEN, 4 * TRAIN_LEN)]
        res["runs"].append(layout)
    res["analytic"] += [{"scheme": "hwfa:W=8", "pattern": p, "length": n, "resolution": 0.3, "per_layer": [0.5, 0.1]}
                        for p in PATTERNS for n in (TRAIN_LEN, 4 * TRAIN_LEN)]
    doc = read(res)
    labels = [r[0] for r in resolution_table(doc).rows]
    assert labels == ["alibi"] * 2 + ["rope"] * 2 + ["hwfa:W=8 (mean over layers)"] * 2
    by_layer = layer_resolution_table(doc)
    assert by_layer.header[:5] == ["layout", "pattern", "layer", f"analytic {TRAIN_LEN}", f"empirical {TRAIN_LEN}"]
    # layer 0: analytic 0.5 as stored, empirical the mean of the seeds' 0.9 and 0.8; layer 1: 0.1 and 0.1
    assert [row[:5] for row in by_layer.rows] == [["hwfa:W=8", p, str(i), a, e] for p in PATTERNS
                                                  for i, (a, e) in enumerate((("0.500", "0.850"), ("0.100", "0.100")))]
    assert "A layout's R above is the mean over its layers" in markdown(res)
    assert "mean over its layers" not in markdown(study_results())  # no layout: no table by layer
