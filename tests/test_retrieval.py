"""lexkit.retrieval: what a pattern can see decides the answer's bits exactly; a model that copies
scores high and a control scores at chance; decoding through the KV cache equals decoding without."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn

from kit import tiny_gpt
from lexkit import retrieval, tasks
from lexkit.attention import create as create_pattern
from lexkit.instruments.retrieval import scoring
from lexkit.instruments.retrieval.rows import RetrievalCell
from lexkit.instruments.subject import RunSubject
from lexkit.model.gpt import BOS, VOCAB, ModelConfig

HAY = tasks.Haystack(b"def f(x):\n    return x + 1  # ok\n" * 20)


@pytest.fixture(scope="module")
def gpt():
    return tiny_gpt("rope", train_len=32)


def _bits(model, doc, pattern, text=None):
    subject = RunSubject.of(model)
    doc = doc if text is None else dataclasses.replace(doc, text=text)
    return retrieval.answer_bits(subject, [doc], model.pattern(pattern))[0]


# -- what a pattern can see -----------------------------------------------------------------------
@pytest.mark.parametrize("pattern, reach", [("window:8", 8), ("bca:8", 8), ("sinks:8,K=1", 8)])
def test_a_needle_beyond_the_reach_of_the_pattern_cannot_change_the_answer(gpt, pattern, reach):
    doc = tasks.make("copy", 72, 0, haystack=HAY, size=4)  # the needle at bytes 1..5, the answer at 68
    # each of the 2 layers moves information back by at most reach - 1 positions; the answer's
    # first logit is at token index doc.answer[0] (the token before it), the needle's last byte at needle[1]
    assert doc.answer[0] - doc.needle[1] > gpt.cfg.n_layers * (reach - 1)
    assert _bits(gpt, doc, pattern) == _bits(gpt, doc, pattern, doc.without_needle())
    assert _bits(gpt, doc, "causal") != _bits(gpt, doc, "causal", doc.without_needle())  # causal sees it


@pytest.mark.parametrize("pattern", ["window:8", "bca:8"])
def test_a_needle_within_reach_changes_the_answer(gpt, pattern):
    doc = tasks.make("copy", 72, 100, haystack=HAY, size=4)  # the needle right before the question
    assert _bits(gpt, doc, pattern) != _bits(gpt, doc, pattern, doc.without_needle())


def test_sinks_keep_the_first_keys(gpt):
    doc = tasks.make("copy", 72, 0, haystack=HAY, size=4)  # tokens: BOS, '~', then the value at 2..5
    assert _bits(gpt, doc, "sinks:8,K=8") != _bits(gpt, doc, "sinks:8,K=8", doc.without_needle())
    assert _bits(gpt, doc, "sinks:8,K=2") == _bits(gpt, doc, "sinks:8,K=2", doc.without_needle())


# -- decoding ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("pattern", ["causal", "window:8"])
def test_greedy_through_the_cache_equals_greedy_without(gpt, pattern):
    subject = RunSubject.of(gpt)
    pat = gpt.pattern(pattern)
    for doc in tasks.documents("copy", 48, 30, 1, haystack=HAY, size=8):
        with_cache = subject.continue_text(doc.prompt, 8, pattern=pat, cache=True)
        without = subject.continue_text(doc.prompt, 8, pattern=pat, cache=False)
        assert with_cache == without and len(with_cache) == 8
        # and greedy decoding is the argmax of the uncached forward pass, token for token
        ids = torch.tensor([[BOS, *doc.prompt, *with_cache[:-1]]])
        argmax = gpt(ids, pattern=pat)[0, -8:, :BOS].argmax(-1)
        assert bytes(argmax.tolist()) == with_cache


def test_exact_match_from_the_teacher_forced_argmax_equals_greedy_decoding(gpt):
    """A document whose answer is what the model decodes greedily is an exact match both ways; one
    byte of it changed (first, last) is a miss both ways (the window: the Induction test below)."""
    subject = RunSubject.of(gpt)
    pat = gpt.pattern("causal")
    doc = tasks.make("copy", 48, 30, haystack=HAY, size=6)
    greedy = subject.continue_text(doc.prompt, 6, pattern=pat)
    variants = [dataclasses.replace(doc, text=doc.prompt + greedy)] + [
        dataclasses.replace(doc, text=doc.prompt + greedy[:i] + bytes([(greedy[i] + 1) % 256]) + greedy[i + 1:])
        for i in (0, 5)]
    teacher = [right for _, right in retrieval.answer_scores(subject, variants, pat)]
    decoded = [retrieval.exact_match(subject, d, pat)[0] for d in variants]
    assert teacher == decoded == [True, False, False]


def test_scores_without_decoding_equal_scores_with(gpt):
    subject = RunSubject.of(Induction())
    grid = dict(depths=[5, 95], samples=3, haystack=DOTS, size=6, patterns=["causal", "window:16"])
    decoded = retrieval.score(subject, "copy", [64], **grid)
    forced = retrieval.score(subject, "copy", [64], decode=False, **grid)
    assert [(r.correct, r.answer_bits) for r in decoded] == [(r.correct, r.answer_bits) for r in forced]
    assert [r.correct for r in forced] == [3, 0, 3, 3] and not any(r.decoded for r in forced)


# -- a model that copies, and a control ---------------------------------------------------------------
class Induction(nn.Module):
    """A hand-built induction model: at token t it looks for the latest earlier bigram equal to
    (x[t-1], x[t]) among the keys the pattern lets t see, and predicts the byte that followed it
    (logit 20); without one, a uniform guess over the letters."""

    def __init__(self, train_len: int = 64) -> None:
        super().__init__()
        self.cfg = ModelConfig(n_layers=1, d_model=8, n_heads=1, train_len=train_len)
        self.anchor = nn.Parameter(torch.zeros(()))

    def pattern(self, spec="causal"):
        return create_pattern(spec, default_window=self.cfg.train_len)

    def forward(self, tokens, pattern="causal", offset=0, *, kernel="auto"):
        pat = self.pattern(pattern)
        b, n = tokens.shape
        out = torch.full((b, n, VOCAB), -30.0)
        out[..., list(tasks.LETTERS)] = 0.0
        idx = torch.arange(n)
        seen = pat.visible(idx[:, None], idx[None, :])  # [n, n]
        t, j = idx[:, None], idx[None, :]  # every (query t, earlier bigram end j) at once, [n, n]
        match = torch.zeros(b, n, n, dtype=torch.bool)  # x[j] == x[t] and x[j - 1] == x[t - 1]
        match[:, 1:, 1:] = (tokens[:, 1:, None] == tokens[:, None, 1:]) & (tokens[:, :-1, None] == tokens[:, None, :-1])
        sees = torch.zeros(n, n, dtype=torch.bool)  # seen[t, j - 1] and seen[t, j + 1]
        sees[:, 1:-1] = seen[:, :-2] & seen[:, 2:]
        latest = torch.where(match & sees & (j >= 1) & (j < t), j, -1).amax(-1)  # [b, n]: the latest such j, or -1
        rows, steps = torch.nonzero(latest >= 0, as_tuple=True)
        out[rows, steps, tokens[rows, latest[rows, steps] + 1]] = 20.0  # the byte that followed it
        return out + self.anchor


DOTS = tasks.Haystack(b"." * 400)  # no letters: a match can only be the needle


def induction_copies(doc: tasks.Document) -> bool:
    """:class:`Induction`'s rule replayed on the document's bytes (causal): each answer byte is the
    byte that followed the latest earlier occurrence of the two bytes before it, or ``a`` when there
    is none (the first of the letters' tied logits). A segment that repeats a pair of its own
    letters copies from the wrong place."""
    x = [BOS, *doc.text]
    for t in range(doc.answer[0], doc.answer[1]):  # position t predicts token t + 1, text byte t
        j = next((j for j in range(t - 1, 0, -1) if (x[j - 1], x[j]) == (x[t - 1], x[t])), None)
        if (x[j + 1] if j is not None else tasks.LETTERS[0]) != x[t + 1]:
            return False
    return True


def test_a_model_that_copies_scores_high_and_a_control_at_chance():
    subject = RunSubject.of(Induction())
    rows = retrieval.score(subject, "copy", [48, 64], depths=[10, 50, 90], samples=4, haystack=DOTS, size=6)
    expected = [sum(map(induction_copies, tasks.documents("copy", n, d, 4, haystack=DOTS, size=6))) / 4
                for n in (48, 64) for d in (10, 50, 90)]
    assert [r.accuracy for r in rows] == expected and sum(expected) / len(expected) >= 0.9
    assert all((r.answer_bits < 1e-6) == (r.accuracy == 1.0) for r in rows) and not any(r.cached for r in rows)
    assert rows[0].low == pytest.approx(retrieval.wilson(round(4 * expected[0]), 4)[0])

    # control: the needle replaced by other random letters; nothing to copy
    pat = subject.model.pattern("causal")
    docs = tasks.documents("copy", 64, 50, 8, haystack=DOTS, size=6)
    control = [dataclasses.replace(d, text=d.without_needle(tasks.make("copy", 64, 50, haystack=DOTS, size=6,
                                                                           split="train", index=i).expected))
               for i, d in enumerate(docs)]
    assert not any(retrieval.exact_match(subject, d, pat)[0] for d in control)
    bits = retrieval.answer_bits(subject, control, pat)
    # the marker still points at the needle's first letter (confidently wrong); the rest is a uniform guess
    assert all(b >= math.log2(26) for b in bits)


def test_a_window_cannot_retrieve_what_it_cannot_see():
    subject = RunSubject.of(Induction())
    rows = retrieval.score(subject, "copy", [64], depths=[5, 95], samples=4, haystack=DOTS, size=6,
                           patterns=["causal", "window:16"])
    acc = {(r.pattern, r.depth): r.accuracy for r in rows}
    seen = {d: sum(map(induction_copies, tasks.documents("copy", 64, d, 4, haystack=DOTS, size=6))) / 4
            for d in (5, 95)}
    assert acc == {("causal", 5.0): seen[5], ("window:16", 5.0): 0.0, ("causal", 95.0): seen[95],
                   ("window:16", 95.0): seen[95]} and min(seen.values()) > 0


# -- measures and rows -------------------------------------------------------------------------------
def test_wilson_interval_closed_form():
    z = 1.959963984540054
    for k, n in [(0, 10), (5, 10), (10, 10), (37, 50)]:
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        assert retrieval.wilson(k, n) == pytest.approx((max(0, centre - half), min(1, centre + half)), abs=1e-12)
    assert retrieval.wilson(0, 10)[1] == pytest.approx(z * z / (10 + z * z))  # 0 successes: z²/(n + z²)
    with pytest.raises(ValueError):
        retrieval.wilson(0, 0)


@pytest.mark.parametrize("name", ["caret", "hex", "marker"])
def test_a_model_that_copies_copies_in_any_format(name):
    """The hand-built induction model matches two bytes back, whatever they are: it copies a
    held-out format as well as the classic one (python's cue ends in the common ' "', so it is
    left to the trained models)."""
    subject = RunSubject.of(Induction())
    docs = tasks.documents("copy", 64, 50, 6, haystack=DOTS, size=6, format=name)
    rows = retrieval.score(subject, "copy", [64], depths=[50], samples=6, haystack=DOTS, size=6, format=name)
    assert rows[0].accuracy == sum(map(induction_copies, docs)) / 6
    if name == "hex":
        assert rows[0].chance_bits == 4.0  # 16 symbols


def test_rows_to_json_and_summary():
    subject = RunSubject.of(Induction())
    rows = retrieval.score(subject, "copy", [48], depths=[20, 80], samples=2, haystack=DOTS, size=6)
    row = rows[0].to_json()
    assert row["task"] == "copy" and row["samples"] == 2 and row["chance_bits"] == pytest.approx(math.log2(26))
    # every field; a copy cell has no candidates, so its guess and candidate rate are left out
    assert set(row) == {f.name for f in dataclasses.fields(RetrievalCell)} - {"guess", "candidate"}
    (line,) = retrieval.summary(rows)
    copied = sum(induction_copies(d) for depth in (20, 80)
                 for d in tasks.documents("copy", 48, depth, 2, haystack=DOTS, size=6))
    assert (line.samples, line.correct, line.accuracy) == (4, copied, copied / 4)
    assert line.to_json()["correct"] == copied and list(line.to_json())[:2] == ["pattern", "length"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(task="find"), "unknown task 'find'"),
    (dict(depths=[0, 110]), r"depth 110 is outside \[0, 100\]"),
    (dict(lengths=[20]), "length 20 is shorter than the copy needle"),
    (dict(samples=0), r"--samples must be a positive integer \(at most [0-9,]+\), got 0"),
])
def test_bad_grids(kwargs, message):
    args = dict(task="copy", lengths=[64], depths=[0], samples=1, style="bytes") | kwargs
    with pytest.raises(ValueError, match=message):
        retrieval.check_grid(**args)


# -- the command ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from lexkit.data.corpus import load_corpus
    from lexkit.training.loop import train
    from lexkit.training.settings import configs
    from toy_corpus import write_corpus

    root = tmp_path_factory.mktemp("retrieval")
    (root / "corpus").mkdir()
    data = write_corpus(root / "corpus")
    model_cfg, train_cfg = configs("tiny", "rope", steps=2, save_every=2, eval_every=2, data=str(data))
    train(root / "run", model_cfg, train_cfg, progress=False, corpus=load_corpus(str(data)))
    return root / "run"


def test_cli_writes_table_json_csv_and_plot(run, tmp_path, capsys):
    import json

    from lexkit.cli import main

    out = tmp_path / "r"
    argv = [str(run), "--task", "copy", "--size", "4", "--lengths", "16,32", "--depths", "0,100", "--samples", "2",
            "--pattern", "causal", "--pattern", "window:8", "--json", f"{out}.json", "--csv", f"{out}.csv",
            "--plot", f"{out}.png"]
    assert main(["retrieval", *argv]) == 0
    text = capsys.readouterr().out
    assert "exact match (%), window:8" in text and "32 (1x)" in text and "answer bits per byte" in text
    report = json.loads((tmp_path / "r.json").read_text())
    assert len(report["rows"]) == 2 * 2 * 2 and report["patterns"] == ["causal", "window:8"]
    assert report["rows"][0]["samples"] == 2 and report["style"] == "bytes"
    assert len((tmp_path / "r.csv").read_text().splitlines()) == 1 + 8
    assert (tmp_path / "r.png").stat().st_size > 0


def test_cli_scores_a_held_out_format(run, tmp_path, capsys):
    import json

    from lexkit.cli import main

    argv = ["retrieval", str(run), "--task", "copy", "--format", "python", "--size", "4", "--lengths", "32",
            "--depths", "50", "--samples", "2", "--json", str(tmp_path / "r.json")]
    assert main(argv) == 0
    assert "task copy, format python (bytes style), 2 documents per cell" in capsys.readouterr().out
    assert json.loads((tmp_path / "r.json").read_text())["format"] == "python"


@pytest.mark.parametrize("extra, message", [
    (["--task", "haystack"], "unknown task 'haystack'"),
    (["--depths", "0,120"], r"depth 120.0 is outside \[0, 100\]"),
    (["--lengths", "10"], "length 10 is shorter than the copy needle"),
    (["--samples", "0"], r"--samples must be a positive integer \(at most [0-9,]+\), got 0"),
    (["--depths", "half"], "--depths: 'half' is not a number"),
    (["--format", "yaml"], "unknown format 'yaml'; valid: tilde, marker, bare, ngram, recall, python, hex, caret"),
    (["--task", "passkey", "--format", "hex"], "task 'passkey' takes no --format; formats are for copy"),
    (["--format", "python", "--lengths", "40"], r"length 40 is shorter than the copy needle and question \(52 bytes"),
])
def test_cli_bad_input_is_one_line_and_writes_nothing(run, tmp_path, capsys, extra, message):
    import re

    from lexkit.cli import main

    argv = ["retrieval", str(run), "--task", "copy", "--lengths", "64", "--json", str(tmp_path / "r.json"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and re.search(message, err[0])
    assert not (tmp_path / "r.json").exists()


@pytest.mark.slow  # fast sibling: test_cli_writes_table_json_csv_and_plot (a lexkit run)
def test_cli_on_a_tiny_saved_hf_model_offline(tmp_path, capsys):
    tf = pytest.importorskip("transformers")
    import json

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from lexkit.cli import main

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([tasks.GRASS, tasks.PASSKEY_TASK, tasks.PASSKEY_NEEDLE, tasks.PASSKEY_QUESTION] * 3,
                            trainer=trainer)
    config = tf.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, max_position_embeddings=64, vocab_size=300, bos_token_id=0,
                            eos_token_id=1)
    torch.manual_seed(0)
    tf.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "m")
    tf.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>").save_pretrained(tmp_path / "m")
    argv = ["retrieval", f"hf:{tmp_path / 'm'}", "--task", "passkey", "--lengths", "300", "--depths", "0,100",
            "--samples", "2", "--json", str(tmp_path / "r.json"), "--device", "cpu"]
    assert main(argv) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["style"] == "standard" and len(report["rows"]) == 2
    assert all(0 <= r["accuracy"] <= 1 and r["answer_bits"] > 0 for r in report["rows"])
    assert "exact match (%), causal" in capsys.readouterr().out


def test_use_of_context_rows_beside_bpb(run):
    rows = retrieval.use_of_context({"rope": str(run), "rope-pi": f"{run}@rope:scaling=linear,factor=2"},
                                    task="copy", multiples=(2, 4), patterns=("causal", "window"), depths=(50,),
                                    samples=1, max_docs=1)
    assert [(r.config, r.pattern, r.multiple, r.length) for r in rows[:4]] == [
        ("rope", "causal", 2, 64), ("rope", "window:32", 2, 64),
        ("rope", "causal", 4, 128), ("rope", "window:32", 4, 128)]
    assert len(rows) == 8 and all(r.bpb is not None and r.bpb > 0 and 0 <= r.accuracy <= 1 for r in rows)
    assert rows[0].to_json()["config"] == "rope"


# -- a grid scores each length, depth and pattern once ---------------------------------------------
def test_a_depth_or_pattern_given_twice_is_scored_once():
    """``--depths 50,50`` reported 10 samples and 0/5 as [0-28] instead of [0-43]; ``window`` and
    ``window:64`` on a run trained at 64 are one pattern."""
    subject = RunSubject.of(Induction())
    with pytest.warns(RuntimeWarning) as caught:
        rows = retrieval.score(subject, "copy", [64, 64], depths=[50, 50.0], samples=5, haystack=DOTS, size=6,
                               patterns=["window", "window:64", "causal"])
    assert [(r.length, r.depth, r.pattern, r.samples) for r in rows] == [(64, 50.0, "window:64", 5),
                                                                        (64, 50.0, "causal", 5)]
    (line, _) = retrieval.summary(rows)
    assert line.samples == 5 and (line.low, line.high) == retrieval.wilson(line.correct, 5)
    notes = sorted(str(w.message) for w in caught)
    assert notes == ["depths: 50.0 given more than once (after resolving): scored once each",
                     "lengths: 64 given more than once (after resolving): scored once each",
                     "patterns: window:64 given more than once (after resolving): scored once each"]


def test_the_command_says_what_it_scored_once(run, tmp_path, capsys):
    import json

    from lexkit.cli import main

    argv = ["retrieval", str(run), "--task", "copy", "--size", "4", "--lengths", "32", "--depths", "50,50",
            "--samples", "5", "--pattern", "window", "--pattern", "window:32", "--json", str(tmp_path / "r.json")]
    assert main(argv) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["depths"] == [50.0] and report["patterns"] == ["window:32"] and len(report["rows"]) == 1
    assert report["summary"][0]["samples"] == 5
    err = capsys.readouterr().err.splitlines()
    assert err == ["warning: depths: 50.0 given more than once (after resolving): scored once each",
                   "warning: patterns: window:32 given more than once (after resolving): scored once each"]


# -- memory: teacher-forced batches of bounded size --------------------------------------------------
def test_rows_per_batch_keeps_the_logits_within_the_budget():
    for tokens, vocab, budget in [(1025, 257, 256 << 20), (8193, 257, 256 << 20), (4097, 32000, 1 << 30),
                                  (1 << 20, 1 << 17, 1 << 20)]:
        rows = retrieval.rows_per_batch(tokens, vocab, budget)
        assert rows >= 1
        assert rows == 1 or rows * tokens * vocab * 4 <= budget < (rows + 1) * tokens * vocab * 4
    # --samples 1000 --lengths 8192 held one batch of ~36 GB (float64); now at most the budget
    assert retrieval.rows_per_batch(8193, 257) * 8193 * 257 * 4 <= retrieval.BATCH_BYTES
    # and one layer's attention scores: heads x n x n float32, SCORE_COPIES of them at once
    copies = retrieval.SCORE_COPIES
    for tokens, heads, budget in [(1023, 4, 1 << 30), (511, 4, 1 << 30), (4095, 12, 1 << 20), (64, 2, 1 << 30)]:
        rows = retrieval.rows_per_batch(tokens, 257, heads=heads, score_budget=budget)
        per = copies * heads * tokens * tokens * 4
        logits = retrieval.rows_per_batch(tokens, 257)
        assert rows == min(logits, max(1, budget // per)) and (rows == 1 or rows * per <= budget)
    # a 2-layer width-64 model of 4 heads at 1,024 bytes: 100 needles in one batch held 13.6 GB
    assert retrieval.rows_per_batch(1023, 257, heads=4) == 8


class Recording(nn.Module):
    """A model that records the batch of every call (a tiny GPT inside)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner, self.cfg, self.batches = inner, inner.cfg, []

    def pattern(self, spec="causal"):
        return self.inner.pattern(spec)

    def forward(self, tokens, pattern="causal", offset=0, *, kernel="auto"):
        self.batches.append(tokens.shape[0])
        return self.inner(tokens, pattern=pattern, kernel=kernel)


def test_answer_scores_in_bounded_batches_equal_one_batch(gpt, monkeypatch):
    docs = tasks.documents("copy", 40, 50, 7, haystack=HAY, size=4)
    model = Recording(gpt)
    pat = gpt.pattern("causal")
    whole = retrieval.answer_scores(RunSubject.of(model), docs, pat)
    assert model.batches == [7]
    monkeypatch.setattr(scoring, "BATCH_BYTES", 3 * 40 * gpt.cfg.vocab_size * retrieval.LOGIT_BYTES)
    model.batches.clear()
    split = retrieval.answer_scores(RunSubject.of(model), docs, pat)
    assert model.batches == [3, 3, 1]
    for (a, ra), (b, rb) in zip(whole, split):
        assert a == pytest.approx(b, rel=1e-6) and ra == rb
    monkeypatch.undo()  # the same split from the scores' budget: three documents' [heads, n, n] x copies
    n = RunSubject.of(model).encode(docs[0].text)[0].numel() - 1  # the tokens the model reads
    monkeypatch.setattr(scoring, "SCORE_BYTES", 3 * retrieval.SCORE_COPIES * gpt.cfg.n_heads * n * n * 4)
    model.batches.clear()
    again = retrieval.answer_scores(RunSubject.of(model), docs, pat)
    assert model.batches == [3, 3, 1] and [r for _, r in again] == [r for _, r in split]


# -- the Python API says what is wrong, as the command line does -------------------------------------
@pytest.mark.parametrize("kwargs, message", [
    (dict(patterns="causal"), r"patterns must be a list, e\.g\. patterns=\['causal', 'window'\], not 'causal'"),
    (dict(lengths=64), r"lengths must be a list, e\.g\. lengths=\[64, 128\], not 64"),
    (dict(depths=50), r"depths must be a list, e\.g\. depths=\[0, 50, 100\], not 50"),
    (dict(lengths=[0]), r"lengths must be a positive integer \(at most 1,048,576\), got 0"),
    (dict(lengths=[64.5]), r"lengths must be a positive integer .*, got 64.5"),
    (dict(size=0), r"--size must be a positive integer \(at most [0-9,]+\), got 0"),
    (dict(samples=2.5), r"--samples must be a positive integer \(at most [0-9,]+\), got 2.5"),
    (dict(patterns=["wndow"]), "unknown attention pattern 'wndow'"),
])
def test_bad_arguments_to_score_are_value_errors(kwargs, message):
    args = dict(lengths=[48], depths=[50], samples=1, haystack=DOTS, size=6) | kwargs
    with pytest.raises(ValueError, match=message):
        retrieval.score(RunSubject.of(Induction()), "copy", **args)


def test_the_chance_line_gives_a_uniform_guess_its_exact_matches(run, capsys):
    """With --size 1 a uniform guess finds the letter 1 time in 26: 3.8 %, said beside the bits."""
    from lexkit.cli import main

    argv = ["retrieval", str(run), "--task", "copy", "--size", "1", "--lengths", "32", "--depths", "50",
            "--samples", "2"]
    assert main(argv) == 0
    assert "chance 4.70 bits per answer byte, exact match by a uniform guess 3.8 %" in capsys.readouterr().out
