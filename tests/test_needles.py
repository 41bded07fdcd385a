"""lexkit.tasks.needles: copy needles in many formats, a trained family and a held-out one. Every format's
documents are what they say, deterministic by seed; the training mix never emits a held-out format
(checked on thousands of documents against rules written here, not the module's); each held-out
format reads as itself and as no other; bad format names are one error line."""

from __future__ import annotations

import re

import pytest
import torch

from lexkit import tasks
from lexkit.data import corpus as data
from lexkit.data import mix
from lexkit.tasks import needles

HAY = tasks.Haystack(b"def f(x):\n    return x + 1  # ok ~ tilde ^ caret\n    y = 'a' + \"b\"\n" * 20)
TRAINED = ["tilde", "marker", "bare", "ngram", "recall"]
HELD_OUT = ["python", "hex", "caret"]


def test_the_registry_lists_the_families():
    assert needles.trained() == TRAINED and needles.held_out_formats() == HELD_OUT
    assert [row[:2] for row in needles.describe()] == [(n, "trained") for n in TRAINED] + [
        (n, "held out") for n in HELD_OUT]


@pytest.mark.parametrize("name", TRAINED + HELD_OUT)
def test_documents_of_every_format_are_what_they_say(name):
    for size in (4, 12):
        length = tasks.minimum_length("copy", size=size, format=name) + 40
        for depth in (0, 50, 100):
            for i in range(4):
                doc = tasks.make("copy", length, depth, haystack=HAY, index=i, size=size, format=name)
                assert len(doc.text) == length and doc.answer[1] == length and doc.format == name
                assert doc.expected == doc.text[doc.needle[0] : doc.needle[1]] and len(doc.expected) == size
                assert doc.distance > 0 and tasks.held_out(doc.expected)  # an evaluation needle
                assert needles.cue(doc.text, doc.needle, doc.answer)  # something precedes it both times
    # the shortest document has no haystack at all: the format's minimum
    doc = tasks.make("copy", needles.get(name).minimum(8), 50, haystack=HAY, size=8, format=name)
    assert len(doc.text) == needles.get(name).minimum(8)


def test_the_default_format_is_the_classic_copy_task():
    for i in range(5):
        doc = tasks.make("copy", 100, 40, haystack=HAY, index=i)
        assert doc == tasks.make("copy", 100, 40, haystack=HAY, index=i, format="tilde")
        assert doc.prompt.endswith(b"~") and doc.text.count(b"~") == 2 and doc.expected.isalpha()


def test_formats_and_the_mix_are_deterministic_by_seed():
    for name in TRAINED + HELD_OUT:
        a = tasks.make("copy", 120, 30, haystack=HAY, seed=3, index=5, format=name, size=8)
        assert a == tasks.make("copy", 120, 30, haystack=HAY, seed=3, index=5, format=name, size=8)
        assert a.text != tasks.make("copy", 120, 30, haystack=HAY, seed=4, index=5, format=name, size=8).text
    docs = [tasks.make("induction", 64, 50, haystack=HAY, seed=1, index=i, split="train") for i in range(40)]
    assert docs == [tasks.make("induction", 64, 50, haystack=HAY, seed=1, index=i, split="train") for i in range(40)]
    assert {d.format for d in docs} == set(TRAINED)  # every trained format is drawn
    stream = mix.MixedStream(data.tokens_of([HAY.text]), "induction:0.5")
    assert torch.equal(stream.batch(3, 16, 64, seed=2)[0], stream.batch(3, 16, 64, seed=2)[0])
    assert not torch.equal(stream.batch(3, 16, 64, seed=2)[0], stream.batch(3, 16, 64, seed=5)[0])


# -- no leak -----------------------------------------------------------------------------------------
def _cue(doc) -> bytes:
    """The common suffix before the needle and before the answer, computed here (32 bytes at most)."""
    a, b = doc.text[: doc.needle[0]][::-1], doc.text[: doc.answer[0]][::-1]
    n = next((i for i in range(min(len(a), len(b), 32)) if a[i] != b[i]), min(len(a), len(b), 32))
    return b[:n][::-1]


def _held_out_signature(doc) -> str | None:
    """The held-out rule, written independently of lexkit.tasks.needles."""
    cue, value = _cue(doc), doc.expected
    if re.search(rb"=\s*[\"']$", cue):
        return "python"
    if set(value) <= set(b"0123456789abcdef") and set(value) & set(b"0123456789") and set(value) & set(b"abcdef"):
        return "hex"
    if b"^" in cue:
        return "caret"
    return None


def test_training_never_emits_a_held_out_format():
    corpus = HAY.text + b'\nNAME = "abc"\nKEY_1 = "a1"\n^start ^x\n' * 3  # text that invites leaks
    haystack = tasks.Haystack(corpus)
    seen = set()
    for i in range(2000):
        length = (64, 96, 200)[i % 3]
        size = mix.mix_size("induction", length, __import__("numpy").random.default_rng(i))
        doc = tasks.make("induction", length, (7 * i) % 101, haystack=haystack, seed=9, index=i, split="train",
                         size=size)
        seen.add(doc.format)
        assert doc.format in TRAINED and not tasks.held_out(doc.expected)
        assert _held_out_signature(doc) is None, (doc.format, doc.text)
        given = doc.text[doc.needle[0] - len(_cue(doc)) : doc.needle[1]]
        assert b"^" not in given  # never a caret in a trained needle, marker or value
    assert seen == set(TRAINED)


#: modules of the study's corpus (Python's standard library) that hold carets (XOR, regular expressions, the
#: control-character notation of curses.ascii): a sample of the real corpus where `^` is common
CARET_MODULES = ("curses/ascii.py", "tokenize.py", "html/parser.py", "csv.py", "re/__init__.py", "difflib.py")


def test_training_batches_hold_carets_of_the_corpus_never_in_a_needle():
    """On the real corpus a few training rows hold a `^` (12 of 9,600 rows of 150 steps x 64 at 64 bytes
    under induction:0.75, docs/retrieval.md): the corpus's own, in haystacks and plain windows. No needle,
    its cue included, ever holds one. Each task row is rebuilt from MixedStream's documented seeding (the
    generators of (seed, step) and (seed, step, row)) and must equal the row drawn."""
    import numpy as np

    root = data.stdlib_root()
    docs = [(root / name).read_bytes() for name in CARET_MODULES if (root / name).is_file()]
    assert sum(doc.count(b"^") for doc in docs) > 50
    stream = mix.MixedStream(data.tokens_of(docs), "induction:0.75")
    length, batch, seed = 64, 32, 0
    rows = {"haystack": 0, "plain": 0}  # rows holding a caret
    for step in range(30):
        x = stream.batch(step, batch, length, seed)[0]
        draws = np.random.default_rng([0x313, seed, step]).random(batch)
        for i in range(batch):
            caret = b"^" in bytes(x[i][x[i] < 256].tolist())
            if draws[i] >= 0.75:
                rows["plain"] += caret
                continue
            rng = np.random.default_rng([0x314, seed, step, i])
            size = mix.mix_size("induction", length, rng)
            doc = tasks.make("induction", length, float(rng.uniform(0, 100)), haystack=stream.haystack, seed=seed,
                             index=step * batch + i, split="train", size=size)
            assert torch.equal(data.encode(doc.text)[:-1], x[i])
            cue = len(needles.cue(doc.text, doc.needle, doc.answer))
            for start, end in (doc.needle, doc.answer):
                assert b"^" not in doc.text[start - cue : end], (doc.format, doc.text)
            rows["haystack"] += caret
    assert rows["haystack"] > 0 and rows["plain"] > 0  # the corpus's carets do reach training


@pytest.mark.parametrize("name", HELD_OUT)
def test_a_held_out_format_reads_as_itself_and_no_other(name):
    for i in range(60):
        doc = tasks.make("copy", 90, (13 * i) % 101, haystack=HAY, index=i, size=2 + i % 12, format=name)
        assert _held_out_signature(doc) == name
        assert needles.reads_held_out(doc.text, doc.needle, doc.answer) == name
        if name == "caret":
            assert doc.text.count(b"^") == 2  # the haystack's own carets are removed


def test_the_held_out_probe_logs_the_guard_beside_the_mix():
    tokens = data.tokens_of([HAY.text])
    probe = mix.mix_probe(tokens, "induction:0.5", 64, count=4)
    assert list(probe) == ["induction", mix.HELD_OUT]
    x, y, mask = probe[mix.HELD_OUT]
    assert x.shape == (4 * len(HELD_OUT), 64) and int(mask.sum()) == 4 * len(HELD_OUT) * mix.PROBE_SIZE
    assert list(mix.mix_probe(tokens, "passkey:0.5", 64, count=2)) == ["passkey"]  # no copy: no guard


def test_identity_names_the_formats_that_define_the_documents():
    assert tasks.identity("copy") == tasks.identity("copy", "tilde") == {"task": "copy", "version": 1, "seeding": 2}
    assert tasks.identity("copy", "python")["format"] == {"python": 1}
    assert tasks.identity("induction")["formats"] == {n: 1 for n in TRAINED}
    assert tasks.seed_name("copy", "tilde") == "copy" and tasks.seed_name("copy", "hex") == "copy@hex"


@pytest.mark.parametrize("call, message", [
    (lambda: tasks.make("copy", 100, 0, haystack=HAY, format="nope"),
     "unknown format 'nope'; valid: tilde, marker, bare, ngram, recall, python, hex, caret"),
    (lambda: tasks.make("passkey", 100, 0, haystack=HAY, format="hex"), "task 'passkey' takes no --format"),
    (lambda: tasks.make("induction", 100, 0, haystack=HAY, format="hex"), "draws a trained format per document"),
    (lambda: tasks.make("copy", 40, 0, haystack=HAY, format="python"),
     r"length 40 is shorter than the copy needle and question \(52 bytes\)"),
])
def test_bad_formats(call, message):
    with pytest.raises(ValueError, match=message):
        call()
