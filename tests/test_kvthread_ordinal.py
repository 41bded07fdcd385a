"""The two tasks no format familiarity passes, ``kvthread`` (Needle Threading, HashHop) and
``ordinal`` (MRCR's structure): documents of exactly the length asked at every depth, deterministic
by seed, no value shared between training and evaluation; a reader that follows the chain (picks
the i-th) scores 100 % through lexkit's scoring, a perfect copier of the needle's format does not;
a value beyond a window's receptive field cannot change the answer; bad parameters are one line."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch
from torch import nn

from kit import tiny_gpt
from lexkit import retrieval, tasks
from lexkit.attention import create as create_pattern
from lexkit.data import mix
from lexkit.data.corpus import tokens_of
from lexkit.instruments.subject import RunSubject
from lexkit.model.gpt import VOCAB, ModelConfig

HAY = tasks.Haystack(b"def f(x):\n    return x + 1  # ok ~ tilde\n" * 20)
SPECS = ["kvthread", "kvthread:direction=backward", "kvthread:hops=1,chains=1", "kvthread:hops=3,chains=3",
         "ordinal", "ordinal:which=1", "ordinal:count=2,which=2", "ordinal:count=12"]
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


# -- a reader that answers by the task's rule, written here from the documents' text alone -----------
def _links(text: bytes, size: int, style: str) -> list[tuple[bytes, bytes]]:
    pattern = rb" ([A-Za-z]{%d}) = ([A-Za-z]{%d})\." if style == "standard" else rb"~([A-Za-z]{%d})=([A-Za-z]{%d})"
    return re.findall(pattern % (size, size), text)


def follow(text: bytes, size: int, style: str = "bytes") -> tuple[bytes, bytes] | None:
    """(answer, what of it the text already holds) when ``text`` ends in a kvthread question (and
    part of its answer): the hash reached by following the links the text holds."""
    if style == "standard":
        asked = re.search(rb"The hash (\d+) hops? (after|before) ([A-Za-z]{%d}) is(.*)\Z" % size, text, re.S)
        if asked is None:
            return None
        hops, way, start, partial = int(asked[1]), asked[2] == b"after", asked[3], asked[4]
    else:
        asked = re.search(rb"~([A-Za-z]{%d})(>+|<+)([A-Za-z]*)\Z" % size, text)
        if asked is None:
            return None
        hops, way, start, partial = len(asked[2]), asked[2][0:1] == b">", asked[1], asked[3]
    step = {a: b for a, b in _links(text, size, style)} if way else {b: a for a, b in _links(text, size, style)}
    for _ in range(hops):
        start = step[start]
    return (b" " if style == "standard" else b"") + start, partial


def pick(text: bytes, size: int, style: str = "bytes") -> tuple[bytes, bytes] | None:
    """The same for an ordinal question: the value of the cue's i-th occurrence."""
    if style == "standard":
        asked = re.search(rb"The (\w+) special magic number for ([a-z]+) mentioned in the provided text is(.*)\Z",
                          text, re.S)
        if asked is None:
            return None
        nth = asked[1].decode()
        i = ORDINALS.index(nth) + 1 if nth in ORDINALS else int(re.match(r"\d+", nth)[0])
        values = re.findall(rb"magic numbers for %s is: (\d{%d})\." % (asked[2], size), text)
        return b" " + values[i - 1], asked[3]
    asked = re.search(rb"~([a-z]{3})#(\d+)=([a-z]*)\Z", text)
    if asked is None:
        return None
    return re.findall(rb"~%s=([a-z]{%d})" % (asked[1], size), text)[int(asked[2]) - 1], asked[3]


def copy_value(text: bytes, size: int, style: str = "bytes") -> tuple[bytes, bytes] | None:
    """A perfect copier of the needle's format: the value after the latest ``~KEY=`` whose key the
    question names (kvthread: its start hash; ordinal: its cue), or nothing when there is none."""
    asked = re.search(rb"~([A-Za-z]+)(?:>+|<+|#\d+=)([A-Za-z]*)\Z", text)
    if asked is None:
        return None
    key = asked[1][:size] if b"#" not in asked[0] else asked[1]
    found = re.findall(rb"~%s=([A-Za-z]{%d})" % (key, size), text)
    return (found[-1] if found else b""), asked[2]


class Reader(nn.Module):
    """A byte model that reads the whole text before each position and, when it ends inside a
    question, gives the next byte of ``rule``'s answer a logit of 20 (every other byte 0). A question
    is a text's last part (no earlier text holds one): the positions are read from the last back to
    the first that is not inside it."""

    def __init__(self, rule, size: int, style: str = "bytes", train_len: int = 64) -> None:
        super().__init__()
        self.rule, self.size, self.style = rule, size, style
        self.cfg = ModelConfig(n_layers=1, d_model=8, n_heads=1, train_len=train_len)
        self.anchor = nn.Parameter(torch.zeros(()))

    def pattern(self, spec="causal"):
        return create_pattern(spec, default_window=self.cfg.train_len)

    def forward(self, tokens, pattern="causal", offset=0, *, kernel="auto"):
        b, n = tokens.shape
        out = torch.zeros((b, n, VOCAB))
        for r in range(b):
            text = bytes(t for t in tokens[r].tolist() if t < 256)  # BOS first: position t has read text[:t]
            for t in range(n - 1, -1, -1):
                found = self.rule(text[:t], self.size, self.style)
                if found is None:
                    break
                if len(found[1]) < len(found[0]):
                    out[r, t, found[0][len(found[1])]] = 20.0
        return out + self.anchor


# -- documents -------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("style", tasks.STYLES)
def test_documents_have_exactly_the_length_asked_at_every_depth(spec, style):
    need = tasks.minimum_length(spec, style)
    for length in (need, need + 1, need + 137):
        for depth in (0, 1, 33.3, 50, 99, 100):
            for index in range(2):
                doc = tasks.make(spec, length, depth, haystack=HAY, style=style, index=index)
                assert len(doc.text) == length and doc.answer[1] == length and doc.prompt + doc.expected == doc.text
                value = doc.text[doc.needle[0]:doc.needle[1]]
                assert doc.expected.strip() == value and doc.distance > 0
                rule = follow if spec.startswith("kvthread") else pick
                assert rule(doc.prompt, len(value), style) == (doc.expected, b"")  # the rule written here answers


@pytest.mark.parametrize("spec", ["kvthread", "kvthread:direction=backward,chains=3", "ordinal:which=3"])
def test_depth_is_the_share_of_the_haystack_before_the_needle(spec):
    """Byte style: the haystack bytes before the needle's piece (the link or occurrence holding
    the answer) are round(free x depth / 100)."""
    length = tasks.minimum_length(spec) + 80
    for depth in (0, 25, 60, 100):
        doc = tasks.make(spec, length, depth, haystack=HAY, index=1)
        pieces = [m.span() for m in re.finditer(rb"~[A-Za-z]+=[A-Za-z]{4}", doc.prompt)]
        (held,) = [p for p in pieces if p[0] < doc.needle[0] < p[1]]
        before = held[0] - sum(b - a for a, b in pieces if b <= held[0])
        assert before == round(80 * depth / 100)


def test_a_kvthread_document_is_chains_of_distinct_hashes_asked_from_an_end():
    doc = tasks.make("kvthread:hops=3,chains=2", 200, 40, haystack=HAY, index=4)
    links = _links(doc.prompt, 4, "bytes")
    assert len(links) == 6 and len({h for link in links for h in link}) == 8  # 2 chains of 4 distinct hashes
    start = re.search(rb"~([A-Za-z]{4})>>>\Z", doc.prompt)[1]
    assert start not in {b for _, b in links}  # the question starts at a chain's first hash
    assert len(doc.distractors) == 5 and doc.alphabet == 52
    back = tasks.make("kvthread:hops=3,direction=backward", 200, 40, haystack=HAY, index=4)
    assert re.search(rb"~([A-Za-z]{4})<<<\Z", back.prompt)[1] not in {a for a, _ in _links(back.prompt, 4, "bytes")}


def test_an_ordinal_document_gives_one_cue_count_times_with_distinct_values():
    for which in range(1, 5):
        doc = tasks.make(f"ordinal:which={which}", 120, 50, haystack=HAY, index=which)
        found = re.findall(rb"~([a-z]{3})=([a-z]{4})", doc.prompt)
        assert len({c for c, _ in found}) == 1 and len({v for _, v in found}) == 4
        assert doc.prompt.endswith(b"#%d=" % which) and doc.expected == found[which - 1][1]
    standard = tasks.make("ordinal:count=12,which=11", 1400, 50, haystack=None, style="standard")
    assert b"The 11th special magic number for " in standard.prompt and len(standard.distractors) == 11


def test_deterministic_by_seed_and_index_and_salted_by_parameters():
    for spec in ("kvthread", "ordinal"):
        a = tasks.make(spec, 120, 40, haystack=HAY, seed=3, index=5)
        assert a == tasks.make(spec, 120, 40, haystack=HAY, seed=3, index=5)
        assert a.text != tasks.make(spec, 120, 40, haystack=HAY, seed=4, index=5).text
        assert a.text != tasks.make(spec, 120, 40, haystack=HAY, seed=3, index=6).text
    # a default given explicitly is the same task (and the same documents); another value is another
    assert tasks.make("kvthread:hops=2,direction=forward", 120, 40, haystack=HAY) == tasks.make("kvthread", 120, 40,
                                                                                               haystack=HAY)
    assert tasks.canonical("kvthread: chains=2, hops=3") == "kvthread:hops=3"
    assert tasks.identity("ordinal:which=2") == {"task": "ordinal:which=2", "version": 1, "seeding": tasks.SEEDING}
    assert tasks.identity("kvthread:hops=2")["task"] == "kvthread"


@pytest.mark.parametrize("spec, style", [("kvthread", "bytes"), ("kvthread:direction=backward", "standard"),
                                         ("ordinal", "bytes"), ("ordinal", "standard")])
def test_training_and_evaluation_values_never_meet(spec, style):
    """Every hash of a kvthread document (not only the answer) and every value of an ordinal one
    belongs to its split (:func:`lexkit.tasks.held_out`): a model never trains on a value it is
    scored on."""
    size = 2 if style == "bytes" else 3

    def values(split):
        out = set()
        for i in range(60):
            doc = tasks.make(spec, tasks.minimum_length(spec, style, size) + 30, 50, haystack=HAY, style=style,
                             split=split, index=i, size=size)
            spans = (doc.needle, *doc.distractors)
            out |= {doc.text[a:b] for a, b in spans} | {h for link in _links(doc.text, size, style) for h in link}
        return out

    ev, tr = values("eval"), values("train")
    assert all(tasks.held_out(v) for v in ev) and not any(tasks.held_out(v) for v in tr)
    assert not ev & tr and len(ev) > 20 and len(tr) > 20


# -- scoring -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["kvthread", "kvthread:hops=3,direction=backward", "ordinal", "ordinal:count=3"])
def test_a_reader_that_follows_the_task_scores_everything_through_lexkits_scoring(spec):
    rule = follow if spec.startswith("kvthread") else pick
    subject = RunSubject.of(Reader(rule, 4))
    length = tasks.minimum_length(spec) + 10
    rows = retrieval.score(subject, spec, [length, 2 * length], depths=[0, 50, 100], samples=3, haystack=HAY)
    assert [r.accuracy for r in rows] == [1.0] * 6 and all(r.answer_bits < 1e-5 for r in rows)
    assert rows[0].task == tasks.canonical(spec)
    # the study's path: context_rows, exact match from the teacher-forced pass
    context, cells = retrieval.context_rows(subject, "reader", task=spec, multiples=(1, 2), patterns=("causal",),
                                            depths=(25, 75), samples=2, size=4, documents=[HAY.text],
                                            bpb_multiples=(), train_len=length, decode=False)
    assert [r.accuracy for r in context] == [1.0, 1.0] and all(c.task == tasks.canonical(spec) for c in cells)


@pytest.mark.parametrize("spec", ["kvthread:direction=backward", "ordinal:count=5"])
def test_a_reader_answers_the_standard_style_through_the_measures(spec):
    rule = follow if spec.startswith("kvthread") else pick
    size = tasks.get(spec).default_size("standard")
    subject = RunSubject.of(Reader(rule, size, "standard"))
    docs = [tasks.make(spec, tasks.minimum_length(spec, "standard") + 60, depth, haystack=None, style="standard",
                       index=i) for depth in (0, 100) for i in range(2)]
    pattern = subject.model.pattern("causal")
    assert all(right and bits < 1e-5 for bits, right in retrieval.answer_scores(subject, docs, pattern))
    assert all(retrieval.exact_match(subject, d, pattern)[0] for d in docs)


def test_a_perfect_copier_of_the_format_fails_both_tasks():
    """What no format familiarity passes: the value after the latest ``~KEY=`` of the asked key
    is the answer of a 1-hop forward question, and of an ordinal question only when the last
    occurrence is asked."""
    subject = RunSubject.of(Reader(copy_value, 4))

    def accuracy(spec):
        rows = retrieval.score(subject, spec, [96], depths=[0, 50, 100], samples=4, haystack=HAY, decode=False)
        return sum(r.correct for r in rows) / 12

    assert accuracy("kvthread:hops=1") == 1.0  # it is a copier
    assert accuracy("kvthread") == accuracy("kvthread:hops=3") == 0.0
    assert accuracy("kvthread:hops=1,direction=backward") == accuracy("kvthread:direction=backward") == 0.0
    assert accuracy("ordinal:which=4") == 1.0 and accuracy("ordinal:which=1") == 0.0
    docs = [d for depth in (0, 50, 100) for d in tasks.documents("ordinal", 96, depth, 4, haystack=HAY)]
    last = sum(d.prompt.endswith(b"#4=") for d in docs) / 12
    assert accuracy("ordinal") == last and 0 < last < 1  # right only when which = count happened to be drawn


@pytest.mark.parametrize("spec", ["kvthread", "kvthread:direction=backward", "ordinal"])
def test_a_value_beyond_the_receptive_field_cannot_change_the_answer(spec):
    gpt = tiny_gpt("rope", train_len=32)
    subject = RunSubject.of(gpt)
    doc = tasks.make(spec, 96, 0, haystack=HAY, size=4)  # the needle's piece first, the question at the end
    assert doc.answer[0] - doc.needle[1] > gpt.cfg.n_layers * (8 - 1)

    def bits(pattern, text):
        return retrieval.answer_bits(subject, [dataclasses.replace(doc, text=text)], gpt.pattern(pattern))[0]

    assert bits("window:8", doc.text) == bits("window:8", doc.without_needle())
    assert bits("bca:8", doc.text) == bits("bca:8", doc.without_needle())
    assert bits("causal", doc.text) != bits("causal", doc.without_needle())  # causal attention sees it


# -- bad parameters ------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, message", [
    ("kvthread:hops=0", r"task kvthread: parameter hops=0 is out of range \(must be 1..1000\)"),
    ("kvthread:hops=two", "task kvthread: parameter hops=two is not a valid int"),
    ("kvthread:direction=up", r"parameter direction=up is out of range \(must be forward or backward\)"),
    ("kvthread:chains=0", "parameter chains=0 is out of range"),
    ("kvthread:hop=2", "unknown parameter 'hop'; valid keys: hops, direction, chains"),
    ("ordinal:count=1", r"parameter count=1 is out of range \(must be 2..1000\)"),
    ("ordinal:which=0", r"parameter which=0 is out of range \(must be any or 1..count\)"),
    ("ordinal:which=5", r"which=5 is out of range \(must be any or 1..count, count=4\)"),
    ("copy:hops=2", "task copy: unknown parameter 'hops'; valid keys: \\(none\\)"),
])
def test_bad_parameters_are_one_error_line_and_exit_2(spec, message, tmp_path, capsys):
    from lexkit.cli import main

    with pytest.raises(ValueError, match=message):
        tasks.make(spec, 200, 50, haystack=HAY)
    out = tmp_path / "r.json"
    assert main(["retrieval", str(tmp_path / "run"), "--task", spec, "--lengths", "64", "--json", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and re.search(message, err[0]) and not out.exists()


def test_too_many_hashes_for_their_size_and_a_short_length_are_refused():
    with pytest.raises(ValueError, match="task kvthread: 14 distinct values of 1 symbols .* use a larger --size"):
        tasks.make("kvthread:hops=6", 200, 50, haystack=HAY, size=1)
    with pytest.raises(ValueError, match=r"length 50 is shorter than the kvthread needle and question \(51 bytes\)"):
        tasks.make("kvthread", 50, 50, haystack=HAY)


# -- the command line and the training mix ---------------------------------------------------------------
def test_lexkit_tasks_lists_both_with_their_parameters(capsys):
    from lexkit.cli import main

    assert main(["tasks"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:len(tasks.names()) + 1]}
    assert "hops=2, direction=forward, chains=2" in lines["kvthread"] and "count=4, which=any" in lines["ordinal"]


def test_lexkit_retrieval_scores_a_run_on_both(trained, tmp_path, capsys):
    import json

    from lexkit.cli import main

    for spec in ("kvthread:hops=2,direction=backward", "ordinal:which=2"):
        out = tmp_path / "r.json"
        argv = ["retrieval", str(trained / "rope"), "--task", spec, "--lengths", "64", "--depths", "50",
                "--samples", "2", "--no-progress", "--json", str(out)]
        assert main(argv) == 0
        report = json.loads(out.read_text())
        assert report["task"] == tasks.canonical(spec) and report["rows"][0]["samples"] == 2
        assert f"task {tasks.canonical(spec)} (bytes style)" in capsys.readouterr().out


def test_a_mix_draws_both_directions_and_hops_and_refuses_a_drawn_parameter_fixed():
    docs = [(f"def f{i}(x):\n    return x * {i}\n" * 30).encode() for i in range(8)]
    stream = mix.MixedStream(tokens_of(docs), "kvthread:0.6,ordinal:0.3")
    x, _ = stream.batch(5, 48, 64, seed=1)
    assert torch.equal(x, stream.batch(5, 48, 64, seed=1)[0])
    rows = [bytes(r[r < 256].tolist()) for r in x]
    questions = {m[1] for r in rows for m in [re.search(rb"~[A-Za-z]{4}(>+|<+)[A-Za-z]{3}\Z", r)] if m}
    assert questions == {b">", b">>", b"<", b"<<"}
    assert any(re.search(rb"~[a-z]{3}#[1-4]=[a-z]{3}\Z", r) for r in rows)
    assert list(mix.mix_probe(tokens_of(docs), "kvthread:0.5", 64, count=4)) == ["kvthread"]
    assert tasks.mix_specs("kvthread") == ["kvthread:hops=1", "kvthread:hops=1,direction=backward", "kvthread",
                                           "kvthread:direction=backward"]
    assert tasks.draw_spec("ordinal", np.random.default_rng(0)) == "ordinal"
    mix.check_mix("kvthread:0.5", 64)
    with pytest.raises(ValueError, match="--mix kvthread: its documents need at least 51 bytes"):
        mix.check_mix("kvthread:0.5", 50)
    with pytest.raises(ValueError, match="a mix draws kvthread's hops per document"):
        mix.parse_mix("kvthread:hops=2:0.5")


def test_lexkit_train_mixes_both_and_logs_their_probe(tmp_path):
    import json

    from lexkit.cli import main
    from toy_corpus import write_corpus

    out = tmp_path / "run"
    argv = ["train", "--preset", "tiny", "--scheme", "rope", "--train-len", "64", "--steps", "2", "--eval-every", "2",
            "--mix", "kvthread:0.3,ordinal:0.2", "--out", str(out), "--data", str(write_corpus(tmp_path)), "--quiet",
            "--threads", "1"]
    assert main(argv) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    probe = [r for r in rows if "val_kvthread_bits" in r]
    assert probe and {"val_kvthread_exact", "val_ordinal_bits", "val_ordinal_exact"} <= set(probe[-1])
    assert json.loads((out / "config.json").read_text())["train"]["mix"] == "kvthread:0.3,ordinal:0.2"


@pytest.mark.xdist_group("hf")  # on the worker that has imported transformers for tests/test_hf.py
def test_an_hf_model_reads_the_standard_style_in_tokens_and_an_oracle_scores_right(tmp_path, capsys):
    """``lexkit retrieval hf:PATH --task kvthread`` builds standard documents to a length in tokens;
    a greedy decoder that emits the answer's tokens is an exact match (the answer's leading space
    kept, as the passkey's)."""
    import json

    import lexkit
    from lexkit.cli import main
    from tiny_hf import SMALL, save, tokenizer

    tf = pytest.importorskip("transformers")
    config = tf.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, max_position_embeddings=64, **SMALL)
    path = save(tf, config, tmp_path / "llama", tokenizer(tf))
    out = tmp_path / "r.json"
    argv = ["retrieval", f"hf:{path}", "--task", "kvthread:direction=backward", "--lengths", "400", "--depths", "50",
            "--samples", "1", "--json", str(out), "--device", "cpu", "--no-progress"]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert report["style"] == "standard" and report["unit"] == "tokens" and report["task"] == argv[3]
    assert 390 <= report["rows"][0]["tokens"] <= 400  # tokens, not bytes (the bisection lands just below)
    assert "task kvthread:direction=backward (standard style)" in capsys.readouterr().out

    subject = lexkit.load(f"hf:{path}")
    for spec, length in (("kvthread:direction=backward", 400), ("ordinal:which=3", 700)):
        doc = retrieval.cell_documents(subject, spec, length, 50, 1, haystack=None)[0]
        ids, prompt = subject.encode(doc.text)[0], subject.encode(doc.prompt)[0]
        assert torch.equal(ids[: prompt.numel()], prompt) and doc.expected.startswith(b" ")
        answer = ids[prompt.numel():].tolist()
        subject.greedy = lambda tokens, answer=answer, **options: (t for t in answer + [1] * 16)  # then </s>
        assert retrieval.exact_match(subject, doc, subject.model.pattern("causal")) == (True, doc.expected)
