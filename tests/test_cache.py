"""lexkit.attention.cache: the KV cache keeps exactly the keys a pattern can still reach, in order,
with flat memory; a cached forward runs only the cache's pattern; what a cache cannot do exactly is
refused by name, and evaluation and generation then run in one pass. (Streamed losses equal to
one pass: test_stream.py.)"""

from __future__ import annotations

import pytest
import torch

from kit import tiny_gpt
from lexkit import attention
from lexkit.attention.cache import _Rows
from lexkit.evaluate import evaluate


@pytest.mark.parametrize("spec", ["causal", "window:12", "bca:12", "window:1", "bca:2", "chunk:7", "chunk:1",
                                  "window:9&bca:12", "sinks:12,K=3&window:20"])
def test_retained_is_exactly_the_keys_a_later_query_can_see(spec):
    """retained(k, q) <=> some query q' >= q sees k (brute force over q' up to 200 > every key)."""
    pat = attention.create(spec, default_window=12) if "&" not in spec else \
        attention.Both(*(attention.create(part) for part in spec.split("&")))
    k = torch.arange(0, 80)
    for q in range(0, 60):
        later = torch.arange(q, 200)
        seen = pat.visible(later[:, None], k[None, :]).any(0)  # [keys]
        if "&" in spec:  # a combination retains a superset (what both parts retain): exact enough for a cache
            assert bool((pat.retained(k, q) | ~seen).all()), (spec, q)
        else:
            assert torch.equal(pat.retained(k, q), seen), (spec, q)


@pytest.mark.parametrize("spec, kept", [
    ("window:12", lambda n: min(n, 11)),  # the last W - 1 keys
    ("bca:12", lambda n: n - max(0, (n // 6 - 1) * 6)),  # the previous block of 6 and the current one
    ("causal", lambda n: n),
])
def test_the_cache_keeps_the_patterns_reach_and_its_memory_stays_flat(spec, kept):
    model = tiny_gpt("rope", max_len=4096, spread=True)
    cache = model.new_cache(spec)
    fed = 0
    with torch.inference_mode():
        for piece in [1, 5, 7, 1, 13, 2, 30, 1, 1, 9] * 6:
            model(torch.randint(0, 256, (1, piece)), pattern=spec, cache=cache)
            fed += piece
            assert cache.seen == fed and len(cache) == kept(fed)
            assert torch.equal(cache.k_idx, torch.arange(fed - kept(fed), fed))
            live = cache.keys[1].live()
            assert live.shape[-2] == len(cache) and cache.values[1].live().shape[-2] == len(cache)
    if spec != "causal":  # capacity bounded by the reach and the largest piece, not by what was fed
        assert cache.keys[0].data.shape[-2] <= 2 * (12 + 30)


def test_rows_keep_a_non_suffix_selection_in_order():
    """A pattern whose kept keys are not a suffix (e.g. always-visible first keys) is gathered."""
    rows = _Rows()
    x = torch.arange(10.0).view(1, 1, 10, 1)
    rows.append(x)
    rows.keep(torch.tensor([True, True, False, False, False, False, True, True, True, True]))
    assert rows.live().flatten().tolist() == [0, 1, 6, 7, 8, 9]
    rows.append(torch.tensor([10.0]).view(1, 1, 1, 1))
    assert rows.live().flatten().tolist() == [0, 1, 6, 7, 8, 9, 10]


def test_the_sinks_cache_keeps_the_first_keys_and_the_reach():
    model = tiny_gpt("rope", max_len=4096, spread=True)
    cache = model.new_cache("sinks:12,K=3")
    with torch.inference_mode():
        for _ in range(10):
            model(torch.randint(0, 256, (1, 7)), pattern="sinks:12,K=3", cache=cache)
    assert cache.k_idx.tolist() == [0, 1, 2] + list(range(70 - 11, 70))


def test_a_cached_forward_refuses_another_pattern_an_offset_or_a_kernel():
    model = tiny_gpt("alibi", max_len=4096, spread=True)
    cache = model.new_cache("window:12")
    x = torch.zeros((1, 3), dtype=torch.int64)
    with torch.inference_mode():
        cases = (dict(pattern="bca:12"), dict(pattern="window:12", offset=5), dict(pattern="window:12", kernel="dense"))
        for kwargs in cases:
            with pytest.raises(ValueError, match="cached forward runs the cache's pattern"):
                model(x, cache=cache, **kwargs)


@pytest.mark.parametrize("scheme, spec, words", [
    ("rope:scaling=dynamic,factor=4", "window:12", "changes its frequencies with the length of each call"),
    ("rope", "sinks:12,pos=cache", "rescores its sinks at their cache slots"),
])
def test_what_the_cache_cannot_do_exactly_is_refused_and_auto_runs_one_pass(scheme, spec, words):
    model = tiny_gpt(scheme, max_len=4096, spread=True)
    with pytest.raises(ValueError, match=words):
        model.new_cache(spec)
    doc = bytes(range(256)) * 2
    out = evaluate(model, [doc], [300], spec, stream="auto", segment=64)
    assert out["results"][0]["streamed"] is False and out["results"][0]["bpb"] is not None
    from lexkit.model.sample import generate, use_cache

    assert use_cache(model, "auto", None, model.pattern(spec)) is False  # generation: no cache either
    assert len(generate(model, b"ab", 5, pattern=spec, temperature=0)) == 5
    with pytest.raises(ValueError, match=words):
        generate(model, b"ab", 5, pattern=spec, temperature=0, cache=True)
