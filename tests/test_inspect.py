"""lexkit inspect's two instruments (lexkit.instruments.inspect) and the command: the byte table's
cosines and norms from a closed form on a hand-set embedding, its counts those of the corpus and of the
replayed batches; the needle mass of uniform attention exactly |N| / n with entropy ln n, of a window
that cannot see the needle exactly 0, of a hand-built induction head on the needle; bad input one error line."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch

import safety_net
from cli_checks import one_error_line
from lexkit import tasks
from lexkit.data import mix
from lexkit.data.corpus import Corpus, Stream, load_corpus, tokens_of
from lexkit.instruments.inspect.bytes import measure as bt
from lexkit.instruments.inspect.needle_mass import measure as nm
from lexkit.instruments.subject import RunSubject
from lexkit.model.gpt import BOS, GPT, VOCAB, ModelConfig

D = 4


def unit(i: int) -> torch.Tensor:
    return torch.eye(D, dtype=torch.float64)[i]


# -- the byte table: closed forms ---------------------------------------------------------------------
def hand_set() -> tuple[torch.Tensor, torch.Tensor]:
    """An embedding whose two unseen tokens (1 and 2) have the mean row e0 + e1, and the trained
    counts that make them the unseen ones (every other token shown once or more)."""
    emb = torch.zeros(VOCAB, D, dtype=torch.float64)
    emb[:] = unit(3)  # orthogonal to the unseen mean: cosine 0, norm 1
    emb[1] = unit(0)  # the unseen: mean (e0 + e0 + 2 e1) / 2 = e0 + e1
    emb[2] = unit(0) + 2 * unit(1)
    emb[10] = 2 * (unit(0) + unit(1))  # along the mean: cosine 1, norm 2 sqrt 2
    emb[11] = 3 * (unit(0) + unit(1))  # cosine 1, norm 3 sqrt 2
    emb[12] = unit(0)  # cosine 1 / sqrt 2
    emb[13] = unit(1) - unit(0)  # orthogonal: cosine 0
    emb[14] = -5 * (unit(0) + unit(1))  # opposite: cosine -1, norm 5 sqrt 2
    trained = torch.arange(VOCAB, dtype=torch.int64) + 1
    trained[1] = trained[2] = 0
    return emb, trained


def test_cosine_and_norm_of_hand_set_rows():
    emb, trained = hand_set()
    corpus = trained * 3
    rows = bt.byte_rows(emb.float(), None, corpus, trained)
    by = {r.token: r for r in rows}
    for token, cosine, norm in ((10, 1.0, 2 * math.sqrt(2)), (11, 1.0, 3 * math.sqrt(2)), (12, 1 / math.sqrt(2), 1.0),
                                (13, 0.0, math.sqrt(2)), (14, -1.0, 5 * math.sqrt(2)), (100, 0.0, 1.0),
                                (1, 1 / math.sqrt(2), 1.0), (2, 3 / math.sqrt(10), math.sqrt(5))):
        assert by[token].cosine == pytest.approx(cosine, abs=1e-7), token
        assert by[token].norm == pytest.approx(norm, rel=1e-7), token
    assert [r.token for r in rows if not r.seen] == [1, 2]
    assert by[65].label == "A" and by[32].label == "space" and by[10].label == "\\n" and by[BOS].label == "BOS"
    assert by[200].label == "\\xc8" and by[7].corpus == 24 and by[7].trained == 8 and by[7].mix is None
    s = bt.summarize(rows, top=2)
    assert s["unseen"] == 2 and s["unseen_tokens"] == ["\\x01", "\\x02"] and s["unseen_by"] == "training windows"
    assert {c["token"] for c in s["collapsed"]} == {10, 11}  # the seen rows along the unseen mean (cosine 1)
    assert s["unseen_cohesion"] == pytest.approx((1 / math.sqrt(2) + 3 / math.sqrt(10)) / 2)
    assert "out_collapsed" not in s and rows[0].to_json().keys() == {"token", "label", "corpus", "seen", "norm",
                                                                       "cosine", "trained"}


def test_unseen_by_the_corpus_and_the_rarest_tokens():
    emb, trained = hand_set()
    corpus = trained.clone()
    corpus[1] = corpus[2] = 5  # in the corpus's text ...
    corpus[10] = 0  # ... and a byte only a mix showed: unseen by the corpus
    rows = bt.byte_rows(emb, None, corpus, trained, unseen_by="corpus")
    assert [r.token for r in rows if not r.seen] == [10]
    assert {r.token: r for r in rows}[11].cosine == pytest.approx(1.0)  # along e0 + e1, as row 10
    s = bt.summarize(rows, top=3, unseen_by="corpus")
    assert s["unseen_by"] == "corpus" and s["in_corpus_never_trained"] == 2
    assert [r["token"] for r in s["rarest"]] == [1, 2, 0]  # by the replayed count: 0, 0, then 1
    with pytest.raises(ValueError, match="--unseen-by 'text': give one of training, corpus"):
        bt.byte_rows(emb, None, corpus, trained, unseen_by="text")


def test_an_untied_head_is_reported_beside_the_input_rows():
    emb, trained = hand_set()
    head = torch.zeros(VOCAB, D, dtype=torch.float64)
    head[:] = unit(2)
    head[1] = head[2] = unit(3)  # the output rows' own unseen mean: e3
    head[20] = 4 * unit(3)
    rows = bt.byte_rows(emb, head, trained, trained)
    by = {r.token: r for r in rows}
    assert by[20].out_cosine == pytest.approx(1.0) and by[20].out_norm == pytest.approx(4.0)
    assert by[20].cosine == pytest.approx(0.0)  # the input row, against the input rows' mean
    assert by[30].out_cosine == pytest.approx(0.0)
    assert bt.summarize(rows, top=1)["out_collapsed"][0]["token"] == 20


def test_every_token_seen_has_no_unseen_mean():
    emb = torch.randn(VOCAB, D)
    rows = bt.byte_rows(emb, None, torch.ones(VOCAB, dtype=torch.int64))
    assert all(r.cosine is None for r in rows) and bt.summarize(rows)["unseen"] == 0
    assert "collapsed" not in bt.summarize(rows) and rows[0].to_json()["cosine"] is None


def test_a_model_ties_its_head_unless_untied():
    model = GPT(ModelConfig(scheme="none", n_layers=1, d_model=8, n_heads=2, train_len=16))
    assert bt.tied(model)
    model.head.weight = torch.nn.Parameter(model.embed.weight.detach().clone())
    assert not bt.tied(model)


# -- the byte table: counts -----------------------------------------------------------------------------
def test_counts_are_the_corpus_text_and_the_replayed_windows(trained):
    report = bt.embedding_run(trained / "alibi")
    config = json.loads((trained / "alibi" / "config.json").read_text())
    docs = load_corpus(config["data"]["spec"]).train
    rows = {r["token"]: r for r in report["rows"]}
    for byte in range(256):  # counted independently, byte by byte in the training documents
        assert rows[byte]["corpus"] == sum(doc.count(bytes([byte])) for doc in docs)
    assert rows[BOS]["corpus"] == len(docs) == report["corpus"]["documents"]
    steps, batch, length = config["train"]["steps"], config["train"]["batch"], config["model"]["train_len"]
    assert report["training"] == {"steps": steps, "trained_steps": steps, "batch": batch, "length": length,
                                  "seed": 0, "mix": None, "windows": steps * batch,
                                  "tokens": steps * batch * (length + 1)}
    assert sum(r["trained"] for r in rows.values()) == steps * batch * (length + 1)
    assert all(r["trained"] == 0 for r in rows.values() if r["corpus"] == 0)
    assert all(r["seen"] == (r["trained"] > 0) for r in rows.values())
    assert report["tied"] and report["summary"]["unseen"] == sum(not r["seen"] for r in rows.values())
    half = bt.embedding_run(trained / "alibi", steps=steps // 2)
    assert all(h["trained"] <= rows[h["token"]]["trained"] for h in half["rows"])
    assert half["training"]["tokens"] == steps // 2 * batch * (length + 1)


def test_the_mix_counts_are_its_task_rows_and_show_its_marker():
    docs = [(f"def f{i}(x):\n    return x * {i}\n" * 20).encode() for i in range(8)]
    stream = mix.MixedStream(tokens_of(docs), "copy:0.5")
    steps, batch, length = 6, 8, 48
    counts, mixed = bt.training_counts(stream, steps, batch, length, 3)
    rows = sum(len(stream.task_rows(step, batch, 3)) for step in range(steps))
    assert 0 < rows < steps * batch
    assert int(mixed.sum()) == rows * (length + 1) and int(counts.sum()) == steps * batch * (length + 1)
    assert bool((mixed <= counts).all())
    mark = tasks.MARK[0]  # copy's marker: never in this corpus (nor in any haystack), shown by the mix alone
    assert bt.stream_counts(tokens_of(docs))[mark] == 0 and counts[mark] == mixed[mark] > 0
    plain, none = bt.training_counts(Stream(docs), steps, batch, length, 3)
    assert none is None and int(plain.sum()) == int(counts.sum())


def test_a_corpus_given_in_memory_and_no_checkpoint(tmp_path):
    model = GPT(ModelConfig(scheme="none", n_layers=1, d_model=8, n_heads=2, train_len=16))
    docs = [b"abcabc\n" * 10, b"xyz" * 5]
    corpus = Corpus("toy", docs, [b"abc" * 10], {"source": "toy", "files": 3, "bytes": 81})
    report = bt.embedding_run(RunSubject.of(model), corpus=corpus)
    rows = {r["token"]: r for r in report["rows"]}
    assert report["training"] is None and report["summary"]["unseen_by"] == "corpus"
    assert rows[ord("a")]["corpus"] == 20 and rows[ord("\n")]["corpus"] == 10 and rows[ord("z")]["corpus"] == 5
    assert report["summary"]["unseen"] == VOCAB - 8 and "trained" not in rows[0]  # seen: a b c \n x y z BOS


# -- needle mass ------------------------------------------------------------------------------------------
HAY = tasks.Haystack(b"def f(x):\n    return x + 1  # ok\n" * 20)


def uniform_model(layers: int = 1) -> GPT:
    """No positions and q = k = 0: every visible key scores 0, so attention is uniform over them."""
    model = GPT(ModelConfig(scheme="none", n_layers=layers, d_model=16, n_heads=2, train_len=32)).eval()
    with torch.no_grad():
        for block in model.blocks:
            block.qkv.weight[: 2 * 16].zero_()  # the q and k projections
    return model


def test_uniform_attention_puts_the_needle_share_on_the_needle():
    model, size = uniform_model(), 8
    subject = RunSubject.of(model)
    docs = [d for depth in (0.0, 50.0, 100.0) for d in tasks.documents("copy", 64, depth, 2, haystack=HAY, size=size)]
    pattern = model.pattern("causal")
    (row,) = nm.mass_rows(nm.answer_attention(subject, docs, pattern), pattern, 64, nm.layer_scopes(model, pattern))
    n = docs[0].answer[0] + 1  # the answer's query sees itself and every key before it
    assert all(d.answer[0] + 1 == n for d in docs) and n == 64 - size + 1
    assert row.visible == n and row.needle == size and row.scope == "global" and row.documents == 6
    for mass in (row.mass, row.mass_max, row.uniform, *row.mass_per_head):
        assert mass == pytest.approx(size / n, rel=1e-6)
    for value in (row.entropy, row.head_entropy, row.uniform_entropy, *row.entropy_per_head):
        assert value == pytest.approx(math.log(n), rel=1e-6)
    # every key ties: the top key is the first (BOS), as far from the needle as its first key
    assert row.top_on_needle == 0.0 and row.top_distance == pytest.approx(np.mean([d.needle[0] + 1 for d in docs]))
    assert row.distance == pytest.approx(np.mean([n - 1 - (d.needle[0] + 1) for d in docs]))


def test_a_window_that_cannot_see_the_needle_puts_nothing_on_it():
    model = uniform_model(2)
    rows = nm.needle_mass(RunSubject.of(model), "copy", [64, 96], depths=[0.0], samples=2, patterns=["window:8"],
                          haystack=HAY, size=8)
    assert [(r.length, r.layer, r.scope) for r in rows] == [(64, 0, "local"), (64, 1, "local"), (96, 0, "local"),
                                                           (96, 1, "local")]
    for r in rows:
        assert r.visible == 8 and r.needle == 0 and r.mass == r.mass_max == r.uniform == 0.0
        assert r.entropy == pytest.approx(math.log(8), rel=1e-6) and r.top_on_needle == 0.0 and r.top_distance > 0


def test_the_induction_head_puts_its_mass_on_the_needle():
    from induction import induction_model

    model = induction_model()
    filler = b"0123 456.789\n" * 6
    head = filler + b"~"
    prompt = head + b"abcd" + filler + b"~"
    doc = tasks.Document("copy", prompt + b"abcd", (len(prompt), len(prompt) + 4), (len(head), len(head) + 4), 50.0, 26)
    pattern = model.pattern("causal")
    local, match = nm.mass_rows(nm.answer_attention(RunSubject.of(model), [doc], pattern), pattern, len(doc.text),
                                nm.layer_scopes(model, pattern))
    assert (local.scope, match.scope) == ("local", "global")
    assert local.needle == 0 and local.mass == 0.0  # layer 0 sees the previous token alone
    assert match.head == 0 and match.mass_max > 0.9 and match.top_on_needle == 1.0 and match.top_distance == 0.0
    assert match.head_entropy < 0.5 * match.uniform_entropy and match.mass_max > 20 * match.uniform


def test_needle_keys_of_a_tokenizer_model_cover_the_span():
    nbytes = torch.tensor([3, 2, 4, 1, 5])  # tokens 1..5 cover bytes [0,3) [3,5) [5,9) [9,10) [10,15)
    assert nm.needle_keys(nbytes, (4, 9), 6).tolist() == [False, False, True, True, False, False]
    assert nm.answer_query(nbytes, 9) == 3  # token 4 starts at byte 9: input index 3 predicts it
    assert nm.span_distance(torch.tensor([0, 3, 7]), torch.tensor(2), torch.tensor(4)).tolist() == [2, 0, 3]


# -- the command line -------------------------------------------------------------------------------------
def test_cli_byte_table(run, tmp_path, capsys):
    from lexkit.cli import main

    out = tmp_path / "b"
    assert main(["inspect", str(run), "--top", "3", "--json", f"{out}.json", "--csv", f"{out}.csv",
                 "--plot", f"{out}.png"]) == 0
    text = capsys.readouterr().out
    assert "unseen (in no replayed training window)" in text and "the seen tokens closest to the unseen mean" in text
    report = json.loads((tmp_path / "b.json").read_text())
    assert report["report"] == "lexkit.inspect.bytes" and len(report["rows"]) == VOCAB
    assert len(report["summary"]["collapsed"]) == 3
    assert len((tmp_path / "b.csv").read_text().splitlines()) == 1 + VOCAB and (tmp_path / "b.png").stat().st_size


def test_cli_needle_mass(run, tmp_path, capsys):
    from lexkit.cli import main

    out = tmp_path / "m"
    assert main(["inspect", str(run), "--needle-mass", "--task", "copy", "--size", "4", "--lengths", "32,64",
                 "--depths", "50", "--samples", "1", "--pattern", "causal", "--pattern", "window:8",
                 "--json", f"{out}.json", "--csv", f"{out}.csv", "--plot", f"{out}.png"]) == 0
    text = capsys.readouterr().out
    assert "attention at the answer, window:8" in text and "L1 global" in text and "64 (2x)" in text
    report = json.loads((tmp_path / "m.json").read_text())
    assert report["report"] == "lexkit.inspect.needle_mass" and report["patterns"] == ["causal", "window:8"]
    assert len(report["rows"]) == 2 * 2 * 2 and (tmp_path / "m.png").stat().st_size
    # the CSV: a row per (pattern, length, layer), every field but the per-head lists (once a crash)
    lines = (tmp_path / "m.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert len(lines) == 1 + len(report["rows"]) and "mass" in header and "mass_per_head" not in header
    assert [line.split(",")[header.index("mass")] for line in lines[1:]] == [repr(r["mass"]) for r in report["rows"]]
    assert report["report_version"] == 4 and {r["scope"] for r in report["rows"]} == {"local", "global"}


def test_a_needle_mass_report_before_version_4_reads_its_kind_as_the_scope(monkeypatch):
    """Version 4 renamed a row's local/global ``kind`` to ``scope``: one reader (NeedleMassRow.from_json,
    report_rows) reads both, and the text, CSV and figure of an older report are today's (the figure
    compared artist by artist, unrendered: rendering it is a second of matplotlib's log-axis layout, done
    for today's report by test_cli_needle_mass)."""
    from lexkit.instruments.inspect.needle_mass import figures, report

    new = json.loads((safety_net.HERE / "needle_mass.json").read_text())
    old = {**new, "report_version": 3, "rows": [{("kind" if k == "scope" else k): v for k, v in r.items()}
                                                for r in new["rows"]]}
    assert "scope" not in old["rows"][0] and old["rows"][0]["kind"] in ("local", "global")
    assert nm.report_rows(old) == nm.report_rows(new) and nm.report_rows(new)[0].scope == new["rows"][0]["scope"]
    assert report.text(old) == report.text(new) and report.csv(old) == report.csv(new)
    drawn = {}
    monkeypatch.setattr(figures, "save", lambda fig, path: drawn.__setitem__(path, fig))
    figures.needle_mass(old, "old.png")
    figures.needle_mass(new, "new.png")

    def artists(fig):  # every panel's title, labels, scales and lines (label, style, points), and the title
        return [fig.get_suptitle()] + [
            (ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), ax.get_xscale(), ax.get_yscale(),
             [(line.get_label(), line.get_color(), line.get_linestyle(), line.get_marker(),
               repr(line.get_xydata().tolist())) for line in ax.get_lines()]) for ax in fig.axes]

    today = artists(drawn["new.png"])
    assert len(drawn["new.png"].axes) == 2 * len(new["patterns"]) and all(panel[-1] for panel in today[1:])
    assert artists(drawn["old.png"]) == today


@pytest.mark.parametrize("extra, message", [
    (["--needle-mass", "--lengths", "0"], "lengths must be positive integers"),
    (["--needle-mass", "--task", "haystack"], "unknown task 'haystack'"),
    (["--needle-mass", "--format", "yaml"], "unknown format 'yaml'; valid: tilde"),
    (["--needle-mass", "--lengths", "10"], "length 10 is shorter than the copy needle"),
    (["--task", "copy"], "--task is for --needle-mass"),
    (["--needle-mass", "--top", "3"], "--top is for the byte table"),
    (["--needle-mass", "--unseen-by", "corpus"], "--unseen-by is for the byte table"),
    (["--unseen-by", "text"], "argument --unseen-by: invalid choice: 'text'"),
    (["--steps", "999"], "--steps 999: .* trained 12 steps"),
    (["--steps", "0"], "--steps must be a positive integer"),
])
def test_cli_bad_input_is_one_line_and_writes_nothing(run, tmp_path, capsys, extra, message):
    from lexkit.cli import main

    try:
        code = main(["inspect", str(run), "--json", str(tmp_path / "r.json"), *extra])
    except SystemExit as exc:  # argparse's own errors (a choice it does not know)
        code = exc.code
    assert code == 2
    assert re.search(message, one_error_line(capsys)) and not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("target, extra, message", [
    ("EMPTY", [], "is not a lexkit run"),
    ("EMPTY", ["--needle-mass"], "is not a lexkit run"),
    ("hf:some/model", [], "the byte table is of a lexkit run"),
])
def test_cli_refuses_what_is_not_a_run(tmp_path, capsys, target, extra, message):
    from lexkit.cli import main

    (tmp_path / "empty").mkdir()
    target = str(tmp_path / "empty") if target == "EMPTY" else target
    assert main(["inspect", target, *extra]) == 2
    assert message in one_error_line(capsys)


def test_a_differential_layer_reports_its_map_per_head_pair():
    """A +diff layer mixes values with softmax(head 2i) - λ·softmax(head 2i+1): its needle mass is that map's
    (computed here from the kernel's own component weights and the layer's λ), one per pair, not a component's;
    a stick-breaking layer's rows say its weights sum to at most 1."""
    torch.manual_seed(0)
    model = GPT(ModelConfig(layout="none+diff;none+stickbreak", n_layers=2, d_model=32, n_heads=4,
                            train_len=32)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".diff." in name:
                p.add_(0.3 * torch.randn_like(p))
    doc = tasks.make("copy", 64, 50.0, haystack=HAY, size=8)
    pattern = model.pattern("causal")
    ids, nbytes = RunSubject.of(model).encode(doc.text)
    query = nm.answer_query(nbytes, doc.answer[0])
    member = nm.needle_keys(nbytes, doc.needle, query + 1)
    seen = {}

    def capture(layer, q_idx, k_idx, scores, probs):
        if layer == 0 and (q_idx == query).any():
            seen["p"] = probs[0, :, int((q_idx == query).nonzero()[0]), :].double()  # [heads, keys]

    with torch.no_grad():
        model(ids[None, : query + 1], pattern=pattern, kernel="chunked", hook=capture)
    lam = float(model.blocks[0].diff.lam().detach())
    by_hand = (seen["p"][0::2] - lam * seen["p"][1::2])[:, member].sum(-1)  # [pairs]
    diff, stick = nm.mass_rows(nm.answer_attention(RunSubject.of(model), [doc], pattern), pattern, 64,
                               nm.layer_scopes(model, pattern), [w for w, _ in nm.weight_maps(model)])
    assert len(diff.mass_per_head) == 2 and diff.mass_per_head == pytest.approx(by_hand.tolist(), rel=1e-9)
    assert diff.weights == "differential" and stick.weights == "stick-breaking"
    assert "weights" not in nm.mass_rows(nm.answer_attention(RunSubject.of(uniform_model()), [doc], pattern), pattern,
                                         64, ["global"])[0].to_json()  # a softmax layer's rows as before
