"""kvthread's denser supervision (``supervise=every``, in the spirit of Sanford, Hsu and Telgarsky 2024's
every-position k-hop supervision): after the asked question and its answer, the same chain is asked at
every shorter hop count from the same start, each answered; the scored answer and its prompt are the
ones of a document without it; a training mix fixes it in the task's spec and draws the rest."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from lexkit import tasks
from lexkit.data import mix
from lexkit.data.corpus import tokens_of
from test_kvthread_ordinal import HAY, follow

QUESTION = {"bytes": rb"~[A-Za-z]{%d}(?:>+|<+)", "standard": rb"The hash \d+ hops? (?:after|before) [A-Za-z]{%d} is"}


@pytest.mark.parametrize("style", tasks.STYLES)
@pytest.mark.parametrize("params", ["hops=2", "hops=3,direction=backward", "hops=4,chains=3", "hops=1"])
def test_every_question_of_the_document_is_answered_by_following_its_links(style, params):
    spec = f"kvthread:supervise=every,{params}"
    hops = int(re.search(r"hops=(\d)", params)[1])
    size = 4
    length = tasks.minimum_length(spec, style, size) + 40
    for depth in (0, 50, 100):
        doc = tasks.make(spec, length, depth, haystack=HAY, style=style, size=size, index=3)
        assert len(doc.text) == length and doc.prompt + doc.expected == doc.text[:doc.answer[1]]
        asked = list(re.finditer(QUESTION[style] % size, doc.text))
        assert len(asked) == hops  # the asked question, then hops - 1 shorter ones
        assert asked[0].end() == len(doc.prompt)  # the first is the scored one
        links = doc.text[:asked[0].start()]
        answers = []
        for question in asked:  # each answered by the hash the links lead to, hops counted from the same start
            want, _ = follow(links + question[0], size, style)
            assert doc.text[question.end():question.end() + len(want)] == want
            answers.append(want)
        assert answers[0] == doc.expected
        tail = doc.text[doc.answer[1]:]
        assert [q.count(b">") + q.count(b"<") for q in re.findall(rb"~[A-Za-z]{4}([<>]+)", tail)] == (
            list(range(1, hops)) if style == "bytes" else [])
        assert doc.answer[1] + len(tail) == length  # the tail ends the document, after the scored answer


def test_the_default_is_the_answer_alone_and_keeps_its_documents():
    plain = tasks.make("kvthread", 120, 40, haystack=HAY, index=2)
    assert plain == tasks.make("kvthread:supervise=answer", 120, 40, haystack=HAY, index=2)
    assert plain.answer[1] == len(plain.text)  # nothing after the answer
    assert tasks.canonical("kvthread:supervise=answer") == "kvthread"
    assert tasks.identity("kvthread:supervise=every")["task"] == "kvthread:supervise=every"
    # the tail costs each shorter question and its answer: 2 hops of 4 symbols, 1 + 4 + 1 + 4 bytes
    assert tasks.minimum_length("kvthread:supervise=every", "bytes", 4) == tasks.minimum_length(
        "kvthread", "bytes", 4) + 10 == 61
    with pytest.raises(ValueError, match=r"supervise.*answer or every"):
        tasks.make("kvthread:supervise=all", 120, 40, haystack=HAY)


def test_a_mix_fixes_it_in_the_spec_and_draws_the_rest():
    assert mix.parse_mix("kvthread:supervise=every:0.2,ordinal:0.1") == {"kvthread:supervise=every": 0.2,
                                                                        "ordinal": 0.1}
    assert mix.parse_mix(" kvthread: chains=3 , supervise=every :0.2") == {
        "kvthread:chains=3,supervise=every": 0.2}  # several parameters, kept canonical
    assert mix.parse_mix(mix.mix_text(mix.parse_mix("kvthread:supervise=every:0.2"))) == {
        "kvthread:supervise=every": 0.2}
    assert tasks.mix_specs("kvthread:supervise=every") == [
        "kvthread:hops=1,supervise=every", "kvthread:hops=1,direction=backward,supervise=every",
        "kvthread:supervise=every", "kvthread:direction=backward,supervise=every"]
    drawn = {tasks.draw_spec("kvthread:supervise=every", np.random.default_rng(i)) for i in range(40)}
    assert drawn == set(tasks.mix_specs("kvthread:supervise=every"))
    mix.check_mix("kvthread:supervise=every:0.5", 61)
    with pytest.raises(ValueError, match="--mix kvthread:supervise=every: its documents need at least 61 bytes"):
        mix.check_mix("kvthread:supervise=every:0.5", 60)
    for bad, message in [("kvthread:direction=backward:0.2", "a mix draws kvthread's direction per document"),
                         ("kvthread:supervise=every", "write TASK:FRACTION"),
                         ("kvthread:supervise=most:0.2", "answer or every")]:
        with pytest.raises(ValueError, match=message):
            mix.parse_mix(bad)


def test_the_stream_trains_on_the_tail_and_the_probe_is_named_by_the_spec():
    docs = [(f"def f{i}(x):\n    return x * {i}\n" * 30).encode() for i in range(8)]
    stream = mix.MixedStream(tokens_of(docs), "kvthread:supervise=every:0.9")
    x, y = stream.batch(0, 12, 64, seed=1)
    rows = [bytes(r[r < 256].tolist()) for r in x] + [bytes(r[-1:].tolist()) for r in y]
    two_hops = [r for r in rows if re.search(rb"~[A-Za-z]{4}>>[A-Za-z]{4}~[A-Za-z]{4}>[A-Za-z]{3}\Z", r)]
    assert two_hops  # a 2-hop forward document ends in its 1-hop question, answered (the target's last byte)
    probe = mix.mix_probe(tokens_of(docs), "kvthread:supervise=every:0.5", 64, count=4)
    assert list(probe) == ["kvthread:supervise=every"]
    inputs, targets, answer = probe["kvthread:supervise=every"]
    assert torch.equal(inputs[:, 1:], targets[:, :-1]) and answer.sum(1).min() >= 4
