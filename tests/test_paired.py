"""Use of context, paired (lexkit.instruments.evaluate.paired): the same bytes at L and K x L with every window
opening on a
byte of its document, the ratio's interval over documents; and evaluate's ``start``."""

import math
import random

import pytest
import torch
import torch.nn.functional as F

from kit import tiny_gpt
from lexkit.core.stats import ratio_interval, t_quantile
from lexkit.evaluate import evaluate, paired_rows
from lexkit.instruments.evaluate.paired import paired_context
from lexkit.model.gpt import BOS


def _documents(n=6, size=200, seed=0):
    rng = random.Random(seed)
    return [bytes(rng.randrange(97, 123) for _ in range(size)) for _ in range(n)]


def test_ratio_interval_is_the_delta_method_of_paired_means():
    a, b = [2.0, 2.2, 1.9, 2.5], [2.1, 2.0, 2.0, 2.4]
    r = sum(a) / sum(b)
    d = [x - r * y for x, y in zip(a, b)]
    s = math.sqrt(sum((v - sum(d) / 4) ** 2 for v in d) / 3)
    half = t_quantile(0.975, 3) * s / 2 / (sum(b) / 4)  # sqrt(n) = 2
    assert ratio_interval(a, b) == pytest.approx((r, r - half, r + half), rel=1e-12)
    assert t_quantile(0.975, 3) == pytest.approx(3.182446305284263, rel=1e-9)  # the t table's value
    # the pairing is what narrows it: the same values unpaired (b shuffled) give a wider interval
    shuffled = ratio_interval(a, [b[2], b[3], b[0], b[1]])
    assert shuffled[2] - shuffled[1] > (r + half) - (r - half)
    assert ratio_interval([1.0], [1.0]) is None and ratio_interval([1.0, 2.0], [0.0, 0.0]) is None
    with pytest.raises(ValueError, match="as many values on each side, got 2 and 3"):
        ratio_interval([1.0, 2.0], [1.0, 2.0, 3.0])


class Spy(torch.nn.Module):
    """A model that records the inputs of every forward pass and answers uniformly."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.cfg = type("cfg", (), {"train_len": 16})()
        self.seen = []

    def forward(self, x, pattern=None, kernel=None):
        self.seen.append(x.clone())
        return torch.zeros(*x.shape, 257) + self.w


def test_under_text_no_window_opens_on_bos_and_under_bos_every_longest_one_does():
    docs = _documents(3, 100)
    spy = Spy()
    evaluate(spy, docs, [16, 64], "causal", start="bos", stream=False)
    longest = torch.cat([x for x in spy.seen if x.shape[1] == 64])
    assert (longest[:, 0] == BOS).all() and longest.shape[0] == 3  # every 4x window is a document's first
    shortest = torch.cat([x for x in spy.seen if x.shape[1] == 16])
    assert int((shortest[:, 0] == BOS).sum()) == 3 and shortest.shape[0] == 12  # one in four
    spy.seen.clear()
    report = evaluate(spy, docs, [16, 64], "causal", start="text", stream=False)
    assert not any((x == BOS).any() for x in spy.seen)
    assert report["start"] == "text" and report["documents"] == 3 and report["bytes_per_document"] == 64
    # the scored bytes are 1..64: the first window's inputs are bytes 0..15 of the document
    first = next(x for x in spy.seen if x.shape[1] == 16)[0]
    assert bytes(first.tolist()) == docs[0][:16]
    with pytest.raises(ValueError, match="unknown start 'first'; valid: bos, text"):
        evaluate(spy, docs, [16], "causal", start="first")


def test_text_start_takes_documents_one_byte_longer():
    """Scoring bytes 1..M needs M + 1 bytes: a document of exactly M takes part under bos, not text."""
    spy = Spy()
    docs = [b"a" * 64, b"b" * 65]
    assert evaluate(spy, docs, [64], "causal", start="bos")["documents"] == 2
    assert evaluate(spy, docs, [64], "causal", start="text")["documents"] == 1


def test_the_token_at_key_0_no_longer_moves_the_long_bpb():
    """What BOS's embedding holds moves every bpb the paper's protocol measures at 4x here (each window opens
    on BOS) and none that start='text' does: the measure no longer reads how a model takes a BOS at key 0."""
    docs = _documents(4, 100)
    model = tiny_gpt("none", train_len=16, untied_head=True)  # BOS's input row alone, not its output logit

    def bpb(start):
        report = evaluate(model, docs, [16, 64], "causal", start=start)
        return {r["length"]: r["bpb"] for r in report["results"]}

    before = {start: bpb(start) for start in ("bos", "text")}
    with torch.no_grad():
        model.embed.weight[BOS] = 30 * torch.randn(model.embed.weight.shape[1])
    after = {start: bpb(start) for start in ("bos", "text")}
    assert after["text"] == before["text"]
    assert abs(after["bos"][64] - before["bos"][64]) > 1e-3


def _direct_bpb(model, doc: bytes, length: int, total: int) -> float:
    """Bits per byte of bytes 1..total of ``doc`` in non-overlapping windows of ``length`` inputs, each
    window opening on a byte of the document: written out with the model's forward and cross entropy."""
    tokens = torch.tensor(list(doc[: total + 1]))
    nll = 0.0
    for s in range(0, total, length):
        x, y = tokens[s : s + length][None], tokens[s + 1 : s + length + 1][None]
        with torch.no_grad():
            logits = model(x).double()
        nll += float(F.cross_entropy(logits[0], y[0], reduction="sum"))
    return nll / total / math.log(2)


def test_the_paired_ratio_equals_a_direct_paired_computation():
    docs = _documents(6, 150, seed=3)
    model = tiny_gpt("rope", train_len=16)
    (row,) = paired_context(model, docs, 16, [64], "causal")
    short = [_direct_bpb(model, d, 16, 64) for d in docs]
    long = [_direct_bpb(model, d, 64, 64) for d in docs]
    want = ratio_interval(long, short)
    assert row.documents == 6 and row.length == 16 and row.longer == 64 and row.pattern == "causal"
    assert row.bpb == pytest.approx(sum(short) / 6, rel=1e-9)
    assert row.bpb_longer == pytest.approx(sum(long) / 6, rel=1e-9)
    assert (row.ratio, row.low, row.high) == pytest.approx(want, rel=1e-9)


def test_paired_rows_refuse_a_report_under_another_start():
    report = evaluate(tiny_gpt("rope", train_len=16), _documents(2, 100), [16, 64], "causal", per_document=True)
    with pytest.raises(ValueError, match="holds the start fixed"):
        paired_rows(report)


def test_lexkit_eval_paired_prints_and_writes_the_interval(tmp_path, capsys):
    import json

    from cli_checks import one_error_line, save_run
    from lexkit.cli import main

    run = save_run(tmp_path, tiny_gpt("rope", train_len=16))
    data = tmp_path / "docs"
    data.mkdir()
    for i, doc in enumerate(_documents(5, 300)):
        (data / f"{i}.txt").write_bytes(doc)
    out = tmp_path / "e.json"
    assert main(["eval", str(run), "--data", str(data), "--lengths", "16,256", "--paired", "--json", str(out),
                 "--threads", "1", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "use of context, paired" in text and "every window opens on a byte of its document" in text
    report = json.loads(out.read_text())
    (row,) = report["paired"]
    assert report["start"] == "text" and row["documents"] == 5 and row["low"] < row["ratio"] < row["high"]
    assert all("per_document" not in r for r in report["results"])
    for flags, words in ((["--start", "bos"], "runs under --start text, not --start bos"),
                         (["--stride", "8"], "leave out --stride"),
                         (["--lengths", "16"], "give two lengths or more")):
        argv = ["eval", str(run), "--data", str(data), "--paired", "--threads", "1"]
        if "--lengths" not in flags:
            argv += ["--lengths", "16,256"]
        assert main(argv + flags) == 2
        assert words in one_error_line(capsys)



def test_lexkit_eval_paired_on_one_document_says_why_there_is_no_interval(tmp_path, capsys):
    """`--paired --max-docs 1` printed a bare `0.990`, no interval and no reason: an interval over
    documents needs at least 2 (lexkit.core.stats.ratio_interval), and without one flatness is undetermined."""
    from cli_checks import save_run
    from lexkit.cli import main

    run = save_run(tmp_path, tiny_gpt("rope", train_len=16))
    data = tmp_path / "docs"
    data.mkdir()
    for i, doc in enumerate(_documents(2, 300)):
        (data / f"{i}.txt").write_bytes(doc)
    argv = ["eval", str(run), "--data", str(data), "--lengths", "16,64", "--paired", "--threads", "1", "--no-progress"]
    assert main(argv + ["--max-docs", "1"]) == 0
    text = capsys.readouterr().out
    assert ("no interval: an interval over documents needs at least 2 documents, and 1 was scored (--max-docs, or "
            "too few documents long enough); without one flatness is undetermined (docs/evaluation.md)") in text
    assert "over 1 document (below 1" in text and "[" not in text.split("ratio [95 % over documents]")[1]
    assert main(argv + ["--max-docs", "2"]) == 0
    text = capsys.readouterr().out
    assert "over 2 documents" in text and "no interval" not in text
