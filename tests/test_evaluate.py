"""Evaluation: the paper's protocol, sliding windows, loss by position, and `lexkit eval`.

Closed forms come from toy models whose logits are known; the protocol is checked on the inputs
the model actually receives."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

import lexkit
from cli_checks import one_error_line
from kit import tiny_gpt
from lexkit import attention
from lexkit.attention import kernels
from lexkit.cli import main
from lexkit.core.errors import DataError
from lexkit.evaluate import (
    csv_rows,
    default_lengths,
    evaluate,
    parse_lengths,
    position_buckets,
    windows,
)
from toy_corpus import STUDY_DOCS

BOS = lexkit.BOS
LOG2_257 = math.log2(257)


# -- toy models with known outputs ---------------------------------------------------------------
class Toy(nn.Module):
    """The GPT call signature; logits given by ``self.logits(tokens)``; records every input."""

    def __init__(self, train_len: int = 8) -> None:
        super().__init__()
        self.cfg = SimpleNamespace(train_len=train_len)
        self.dummy = nn.Parameter(torch.zeros(()))
        self.inputs: list[torch.Tensor] = []

    def pattern(self, spec="causal"):
        return attention.create(spec, default_window=self.cfg.train_len)

    def forward(self, tokens, pattern="causal", offset=0, *, kernel="auto", hook=None):
        self.inputs.extend(tokens.clone())
        return self.logits(tokens)

    def logits(self, tokens):
        return torch.zeros(*tokens.shape, 257)


class Oracle(Toy):
    """Knows the documents (byte k is k mod 256, BOS is followed by byte 0): logit a_t = 0.25 t
    on the right next byte at window index t, 0 elsewhere, so NLL_t = log(256 + e^a_t) - a_t.
    A window whose first input were wrong (BOS mid-document, or a byte other than the previous
    one) would cost log(256 + e^a_t) there instead."""

    @staticmethod
    def a(t):
        return 0.25 * t

    def logits(self, tokens):
        b, n = tokens.shape
        target = torch.where(tokens == BOS, 0, (tokens + 1) % 256)
        out = torch.zeros(b, n, 257)
        out.scatter_(2, target[..., None], self.a(torch.arange(n, dtype=torch.float32)).expand(b, n)[..., None])
        return out


def nll_at(t: int) -> float:
    a = Oracle.a(t)
    return math.log(256 + math.exp(a)) - a


def counting(n: int) -> bytes:
    return bytes(k % 256 for k in range(n))


def random_docs(sizes, seed=0) -> list[bytes]:
    g = torch.Generator().manual_seed(seed)
    return [bytes(torch.randint(97, 123, (n,), generator=g).tolist()) for n in sizes]


# -- the protocol ---------------------------------------------------------------------------------
@pytest.mark.parametrize("total", [48, 50, 64])
@pytest.mark.parametrize("stride", [None, 1, 3, 8])
def test_windows_score_every_byte_exactly_once_at_every_length(total, stride):
    for length in range(1, total + 1):
        placed = windows(total, length, stride)
        scored = [start + p for start, first in placed for p in range(first, length)]
        assert sorted(scored) == list(range(total)), (length, stride)  # all bytes, once each
        assert placed[0] == (0, 0)  # the first window starts at BOS and scores all its bytes
        assert all(0 <= start and start + length <= total for start, _ in placed)


def test_windows_are_the_papers_chunks_when_the_length_divides():
    assert windows(64, 16) == [(0, 0), (16, 0), (32, 0), (48, 0)]
    assert windows(64, 16, 16) == windows(64, 16, 99) == windows(64, 16)
    assert windows(10, 4) == [(0, 0), (4, 0), (6, 2)]  # remainder: last window ends at byte 9
    assert windows(10, 4, 1) == [(0, 0)] + [(s, 3) for s in range(1, 7)]


def test_model_inputs_are_bos_or_the_previous_byte_and_every_length_scores_the_same_bytes():
    docs = [bytes(range(10, 60)), bytes(range(100, 140)), b"short"]  # 50, 40, 5 bytes
    lengths = [4, 8, 16, 32]
    model = Toy()
    out = evaluate(model, docs, lengths, batch_size=3)
    assert out["documents"] == 2 and out["bytes_per_document"] == 32
    assert [r["bytes"] for r in out["results"]] == [64] * 4
    rows = iter(model.inputs)
    for length in lengths:
        starts = {0: [], 1: []}
        for _ in range(2 * (32 // length)):
            row = next(rows)
            assert row.numel() == length
            if row[0] == BOS:
                doc, start = (0 if row[1] == 10 else 1), 0
            else:  # the byte before the chunk: start = its index + 1
                doc = 0 if int(row[0]) < 100 else 1
                start = docs[doc].index(int(row[0])) + 1
            encoded = torch.tensor([BOS, *docs[doc]])
            assert torch.equal(row, encoded[start : start + length])
            starts[doc].append(start)
        assert starts[0] == starts[1] == list(range(0, 32, length))
    assert next(rows, None) is None


def test_uniform_logits_give_log2_257_bits_per_byte():
    out = evaluate(Toy(train_len=8), random_docs([40, 70, 33]), [2, 8, 32], ["causal", "window"])
    assert out["patterns"] == ["causal", "window:8"]  # canonical, W resolved
    assert len(out["results"]) == 6
    for r in out["results"]:
        assert r["bpb"] == pytest.approx(LOG2_257, rel=1e-12)
        assert r["ppl"] == pytest.approx(257, rel=1e-9)
        assert r["bytes"] == 3 * 32


def test_bpb_is_mean_nll_over_ln2_in_closed_form():
    docs = [counting(64), counting(80)]
    out = evaluate(Oracle(), docs, [8, 16, 64])
    for r in out["results"]:
        L = r["length"]
        mean = sum(nll_at(t) for t in range(L)) / L  # every chunk holds positions 0..L-1 once
        assert r["bpb"] == pytest.approx(mean / math.log(2), rel=1e-9)
        assert r["ppl"] == pytest.approx(math.exp(mean), rel=1e-9)
        assert r["bytes"] == 128


def test_stride_mode_in_closed_form():
    L, S, M = 16, 4, 64
    out = evaluate(Oracle(), [counting(M), counting(M + 7)], [L, M], stride=S)
    r = next(r for r in out["results"] if r["length"] == L)
    later = (M - L) // S  # windows after the first, each scoring its last S positions
    total = sum(nll_at(t) for t in range(L)) + later * sum(nll_at(t) for t in range(L - S, L))
    assert r["stride"] == S and r["bytes"] == 2 * M
    assert r["bpb"] == pytest.approx(total / M / math.log(2), rel=1e-9)
    # the position buckets agree with the same count of scored positions
    buckets = [b for b in out["by_position"] if b["length"] == L]
    for b in buckets:
        ts = range(b["from"], b["to"])
        n = [1 + (later if t >= L - S else 0) for t in ts]
        assert b["bytes"] == 2 * sum(n)
        assert b["bpb"] == pytest.approx(sum(k * nll_at(t) for k, t in zip(n, ts)) / sum(n) / math.log(2), rel=1e-9)
    assert out["stride"] == S


def test_stride_equal_to_length_is_the_papers_protocol_on_a_real_model():
    model, docs = tiny_gpt("alibi"), random_docs([100, 130])
    plain = evaluate(model, docs, [16, 32, 64])
    strided = evaluate(model, docs, [16, 32, 64], stride=64)  # clamped to each length
    assert [r["bpb"] for r in strided["results"]] == pytest.approx([r["bpb"] for r in plain["results"]], rel=1e-6)
    small = evaluate(model, docs, [16, 32, 64], stride=5)
    assert [r["bytes"] for r in small["results"]] == [128] * 3
    assert [r["stride"] for r in small["results"]] == [5, 5, 5]


def test_by_position_buckets_cover_every_position_and_split_at_the_training_length():
    assert position_buckets(1) == [(0, 1)]
    assert position_buckets(48, 12) == [(0, 1), (1, 2), (2, 4), (4, 8), (8, 12), (12, 16), (16, 32), (32, 48)]
    out = evaluate(Oracle(train_len=12), [counting(96)], [12, 24, 96])
    for r in out["results"]:
        L = r["length"]
        rows = [b for b in out["by_position"] if b["length"] == L]
        assert rows[0]["from"] == 0 and rows[-1]["to"] == L
        assert all(a["to"] == b["from"] for a, b in zip(rows, rows[1:]))  # contiguous
        assert sum(b["bytes"] for b in rows) == r["bytes"]
        for b in rows:
            assert b["beyond_train"] == (b["from"] >= 12) and (b["to"] <= 12 or b["from"] >= 12)
            mean = sum(nll_at(t) for t in range(b["from"], b["to"])) / (b["to"] - b["from"])
            assert b["bpb"] == pytest.approx(mean / math.log(2), rel=1e-9)
        weighted = sum(b["bpb"] * b["bytes"] for b in rows) / r["bytes"]
        assert weighted == pytest.approx(r["bpb"], rel=1e-9)


def test_a_length_past_the_learned_table_is_unavailable_not_an_error():
    model = tiny_gpt("learned", train_len=16)
    out = evaluate(model, random_docs([64, 64]), [8, 16, 32], ["causal", "window"])
    by = {(r["length"], r["pattern"]): r for r in out["results"]}
    assert by[(16, "causal")]["bpb"] > 0 and "unavailable" not in by[(16, "causal")]
    for pattern in ("causal", "window:16"):
        r = by[(32, pattern)]
        assert r["bpb"] is None and r["ppl"] is None and r["bytes"] == 0
        assert "learned" in r["unavailable"] and "31" in r["unavailable"]
    assert not any(b["length"] == 32 for b in out["by_position"])
    json.dumps(out, allow_nan=False)  # JSON-ready
    with pytest.raises(ValueError, match="no requested length can run"):
        evaluate(model, random_docs([64]), [32, 64])


def test_documents_too_short_raise_a_data_error_with_the_counts():
    with pytest.raises(DataError) as info:
        evaluate(Toy(), [b"x" * 10, b"y" * 37, b"z"], [8, 64])
    message = str(info.value)
    assert "3 documents" in message and "37" in message and "64" in message
    with pytest.raises(DataError, match="0 documents"):
        evaluate(Toy(), [], [8])


def test_caps_on_documents_and_bytes():
    docs = random_docs([40] * 6)
    assert evaluate(Toy(), docs, [8, 32], max_docs=2)["documents"] == 2
    out = evaluate(Toy(), docs, [8, 32], max_bytes=100)
    assert out["documents"] == 3 and out["results"][0]["bytes"] == 96
    assert evaluate(Toy(), docs, [32], max_bytes=5)["documents"] == 1  # at least one document


@pytest.mark.parametrize("text", ["0", "-8,16", "a", "1.5", "", "16,,32", "16;32"])
def test_bad_lengths_are_a_value_error(text):
    with pytest.raises(ValueError, match="lengths must be positive integers"):
        parse_lengths(text)


def test_lengths_parse_and_default():
    assert parse_lengths("256, 64,128,64") == [64, 128, 256]
    assert default_lengths(128) == [64, 128, 256, 512, 1024, 2048]
    assert default_lengths(1) == [1, 2, 4, 8, 16]
    with pytest.raises(ValueError, match="lengths must be positive integers"):
        evaluate(Toy(), [b"x" * 8], [0, 8])
    with pytest.raises(ValueError, match="stride"):
        evaluate(Toy(), [b"x" * 8], [8], stride=0)


def test_kernels_agree():
    model, docs = tiny_gpt("rope"), random_docs([96, 96])
    dense = evaluate(model, docs, [16, 96], ["causal", "window:8"], kernel="dense")
    chunked = evaluate(model, docs, [16, 96], ["causal", "window:8"], kernel="chunked")
    assert [r["bpb"] for r in dense["results"]] == pytest.approx([r["bpb"] for r in chunked["results"]], abs=1e-4)


def test_long_local_evaluation_never_builds_an_n_by_n_mask(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("dense n x n path used")

    monkeypatch.setattr(kernels.Attention, "dense_mask", refuse)
    monkeypatch.setattr(kernels.dense, "attend", refuse)
    model = tiny_gpt("alibi", train_len=16)
    seen = []
    model.register_forward_pre_hook(lambda module, args: seen.append(tuple(args[0].shape)))
    n = kernels.DENSE_MAX + 512  # past the dense kernel's range on CPU
    out = evaluate(model, random_docs([n]), [n], "window")
    assert seen == [(1, n)]  # one window per batch at a long length
    assert out["results"][0]["bytes"] == n and math.isfinite(out["results"][0]["bpb"])


# -- lexkit eval ----------------------------------------------------------------------------------
def make_run(tmp: Path, scheme="alibi", train_len=16, sizes=(400,) * 12) -> Path:
    """A real run directory (untrained weights) on a corpus of made-up documents."""
    from lexkit.data.corpus import load_corpus
    from lexkit.training import runs

    docs = tmp / "docs"
    docs.mkdir(exist_ok=True)
    for i, doc in enumerate(random_docs(sizes, seed=1)):
        (docs / f"doc{i:02d}.txt").write_bytes(doc)
    corpus = load_corpus(str(docs))
    model = tiny_gpt(scheme, train_len=train_len)
    run = tmp / "run"
    run.mkdir()
    runs.save_weights(run, model)
    runs.write_json(run / "config.json", {
        "model": dataclasses.asdict(model.cfg),
        "data": {"spec": str(docs), "fingerprint": corpus.fingerprint},
    })
    return run


def test_cli_eval_prints_a_table_and_writes_json_and_csv(tmp_path, capsys):
    run = make_run(tmp_path, "learned")
    out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
    rc = main(["eval", str(run), "--lengths", "8,16,32", "--pattern", "causal", "--pattern", "window:4",
               "--data", str(tmp_path / "docs"), "--json", str(out_json), "--csv", str(out_csv)])
    assert rc == 0
    stdout = capsys.readouterr().out
    table = stdout.splitlines()
    header = next(line for line in table if line.startswith("pattern"))
    assert header.split()[1::2] == ["8", "16", "32"]  # lengths as columns
    causal = next(line for line in table if line.startswith("causal"))
    assert causal.split()[-1] == "-"  # 32 is past the learned table
    report = json.loads(out_json.read_text())
    assert {"report", "report_version", "lexkit_version", "run", "scheme", "train_len", "data", "results",
            "by_position"} <= set(report)
    assert report["scheme"] == "learned:max_len=16" and report["train_len"] == 16  # the resolved spec that ran
    assert report["data"]["split"] == "all" and report["data"]["documents"] == 12
    assert report["data"]["fingerprint"]["files"] == 12
    assert [(r["length"], r["pattern"]) for r in report["results"]] == [
        (n, p) for n in (8, 16, 32) for p in ("causal", "window:4")
    ]
    assert report["results"][-1]["bpb"] is None and "learned" in report["results"][-1]["unavailable"]
    lines = out_csv.read_text().splitlines()
    assert lines[0] == "length,pattern,stride,bpb,ppl,bytes,unavailable,label,scheme,layout,logn,streamed,kernel"
    rows = list(csv.DictReader(out_csv.open()))  # a model without a layout: the column is empty
    assert len(rows) == 6 and {(r["label"], r["scheme"], r["layout"]) for r in rows} == {
        ("learned:max_len=16", "learned:max_len=16", "")}
    assert csv_rows(report)[0]["bytes"] == 12 * 32
    # the kernel that ran, per cell (auto: dense on the CPU at these lengths); none where nothing ran
    assert [r.get("kernel") for r in report["results"]] == ["dense"] * 4 + [None, None]
    assert csv_rows(report)[0]["kernel"] == "dense" and "attention kernel auto: ran dense" in stdout


def test_cli_eval_defaults_to_the_runs_validation_split_and_default_lengths(tmp_path, capsys):
    run = make_run(tmp_path, "alibi", train_len=8, sizes=(200,) * 30)
    assert main(["eval", str(run), "--stride", "16"]) == 0
    stdout = capsys.readouterr().out
    assert "(validation)" in stdout and "stride 16" in stdout
    header = next(line for line in stdout.splitlines() if line.startswith("pattern"))
    assert [int(x) for x in header.split()[1::2]] == [4, 8, 16, 32, 64, 128]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--lengths", "0,64"], "lengths must be positive integers, got '0,64'"),
        (["--lengths", "64,abc"], "lengths must be positive integers"),
        (["--pattern", "nope"], "unknown attention pattern 'nope'"),
        (["--pattern", "window:0"], "out of range"),
        (["--pattern", "bca:3"], "out of range"),
        (["--stride", "0"], "--stride must be a positive integer"),
        (["--lengths", "100000", "--data", "DOCS"],
         "no document is 100,000 bytes long (12 documents, the longest 400 bytes"),
        (["--data", "/no/such/path"], "does not exist"),
    ],
)
def test_cli_eval_bad_input_is_one_error_line_and_overwrites_nothing(tmp_path, capsys, argv, message):
    run = make_run(tmp_path)
    keep = tmp_path / "keep.json"
    keep.write_text("precious")
    argv = [str(tmp_path / "docs") if a == "DOCS" else a for a in argv]
    rc = main(["eval", str(run), *argv, "--json", str(keep), "--csv", str(tmp_path / "c.csv")])
    assert rc == 2
    assert message in one_error_line(capsys)
    assert keep.read_text() == "precious" and not (tmp_path / "c.csv").exists()


def test_cli_eval_bad_run_directories(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "missing")]) == 2
    assert "does not exist" in one_error_line(capsys)
    (tmp_path / "empty").mkdir()
    assert main(["eval", str(tmp_path / "empty")]) == 2
    assert "not a lexkit run" in one_error_line(capsys)
    run = make_run(tmp_path)
    weights = run / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert main(["eval", str(run), "--lengths", "16"]) == 2
    assert "corrupt or truncated" in one_error_line(capsys)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cli_eval_cuda_without_cuda(tmp_path, capsys):
    run = make_run(tmp_path)
    assert main(["eval", str(run), "--device", "cuda"]) == 2
    assert "CUDA" in one_error_line(capsys)


def test_the_report_and_csv_record_the_scheme_that_ran(tmp_path, capsys):
    """--scheme rerope runs w = the training length (16), not the spec's default; yarn keeps its
    original_len; the CSV carries scheme, log-n and whether each row streamed."""

    run = make_run(tmp_path, "rope")
    for spec, recorded in (("rerope", "rerope:w=16"), ("rope:scaling=yarn,factor=4", "original_len=16")):
        out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
        assert main(["eval", str(run), "--lengths", "16", "--scheme", spec, "--logn", "--json", str(out_json),
                     "--csv", str(out_csv), "--no-progress"]) == 0
        report = json.loads(out_json.read_text())
        assert recorded in report["scheme"] and report["trained_scheme"] == "rope"
        rows = list(csv.DictReader(out_csv.open()))
        assert rows[0]["scheme"] == report["scheme"] and rows[0]["logn"] == "True"
        assert rows[0]["streamed"] == "False"
    capsys.readouterr()


def test_the_top_level_api_and_the_subject_of_a_run(tmp_path):
    """lexkit.load gives a subject (model, encode/decode, documents, description, refusals);
    lexkit.evaluate / lexkit.resolution are the modules' main functions, the modules still import."""
    import lexkit
    from lexkit import resolution

    run = make_run(tmp_path, "rope")
    subject = lexkit.load(run)
    tokens, nbytes = subject.encode("hé")
    assert tokens.tolist() == [256, 104, 195, 169] and nbytes.tolist() == [1, 1, 1]
    assert subject.decode(tokens) == "hé".encode() and subject.default_lengths() == [8, 16, 32, 64, 128, 256]
    docs, described = subject.documents()
    assert described["split"] == "validation" and subject.describe()["scheme"] == "rope"
    with pytest.raises(ValueError, match="--rope-scaling is for hf: models"):
        lexkit.load(run, rope_scaling="yarn:4")
    greedy = subject.generate(tokens, 5)  # through the KV cache under causal
    context = tokens.clone()
    with torch.no_grad():
        for _ in range(5):  # the same, one plain forward pass per token
            context = torch.cat((context, subject.model(context[None])[0, -1].argmax()[None]))
    assert greedy.tolist() == context[4:].tolist()
    direct = evaluate(subject.model, docs, [16])
    assert lexkit.evaluate(subject.model, docs, [16]) == direct and lexkit.evaluate.windows(4, 2) == [(0, 0), (2, 0)]
    assert lexkit.resolution("rope", [64]) == resolution.analytic("rope", [64])
    assert lexkit.resolution(subject, [16], texts_per_length=1)["results"][0]["texts"] == 1


def test_rows_are_typed_and_their_json_is_the_reports():
    """Every result and bucket of a report is a typed row's to_json(): from_json(row).to_json()
    gives the same dict back, key order included (the JSON on disk is unchanged)."""
    from lexkit.instruments.evaluate.rows import EvalRow, PositionRow, eval_rows, position_rows

    report = evaluate(tiny_gpt("learned", train_len=16), random_docs([70, 90]), [8, 16, 32], ["causal", "window:4"])
    rows = eval_rows(report)
    assert [list(r.to_json().items()) for r in rows] == [list(r.items()) for r in report["results"]]
    buckets = position_rows(report)
    assert [list(r.to_json().items()) for r in buckets] == [list(r.items()) for r in report["by_position"]]
    past = [r for r in rows if r.bpb is None]  # learned has 16 positions: 32 is past its table
    assert {r.length for r in past} == {32} and all("learned" in r.unavailable for r in past)
    assert "tokens" not in rows[0].to_json() and "unavailable" not in rows[0].to_json()
    assert PositionRow.from_json(report["by_position"][0]).from_ == 0
    assert EvalRow(8, "causal", 8, False, 1.0, 2.0, tokens=5, bytes=9).to_json()["tokens"] == 5


@pytest.mark.parametrize("trained, asked, words", [
    ("rope", "t5", "it needs parameters the weights do not have (scheme.table)"),
    ("t5", "alibi", "the weights have parameters it does not use (scheme.table)"),
])
def test_eval_under_another_scheme_blames_the_scheme_not_the_file(tmp_path, capsys, trained, asked, words):
    """A run's weights that do not fit the --scheme asked for: the message names the flag and the
    scheme's parameters, never "model.safetensors does not match config.json" (the file is fine)."""
    from cli_checks import one_error_line, save_run

    run = save_run(tmp_path, tiny_gpt(trained, n_layers=1, d_model=16, train_len=8, seed=None))
    data = tmp_path / "doc.txt"
    data.write_bytes(STUDY_DOCS[0])
    assert main(["eval", str(run), "--scheme", asked, "--lengths", "8", "--data", str(data), "--no-progress"]) == 2
    line = one_error_line(capsys)
    assert f"--scheme {asked} does not fit the weights of {run}" in line and words in line, line
    assert "does not match config.json" not in line
