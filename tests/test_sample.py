"""Sampling: exactly N bytes, deterministic with a seed, past the training length; `lexkit sample`."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

import lexkit
from cli_checks import one_error_line, save_run
from kit import tiny_gpt
from lexkit import attention
from lexkit.cli import main
from lexkit.model.sample import generate, iter_generate


class Favourite(nn.Module):
    """Logits that prefer BOS most, then byte ``b`` (so BOS must be excluded), with the context
    length recorded at every call."""

    def __init__(self, b: int) -> None:
        super().__init__()
        self.b, self.cfg, self.calls = b, SimpleNamespace(train_len=4), []
        self.dummy = nn.Parameter(torch.zeros(()))

    def pattern(self, spec="causal"):
        return attention.create(spec, default_window=4)

    def forward(self, tokens, pattern="causal", offset=0, *, kernel="auto", hook=None):
        self.calls.append(tokens.shape[1])
        logits = torch.zeros(*tokens.shape, 257)
        logits[..., 256] = 50.0
        logits[..., self.b] = 10.0
        return logits


def test_seeded_sampling_is_deterministic_and_runs_past_the_training_length():
    model = tiny_gpt("rope", train_len=16)
    prompt = b"def f(x):\n    "  # 14 bytes + BOS; 20 more bytes reach position 34 > 16
    a = generate(model, prompt, 20, seed=7)
    assert len(a) == 20 and isinstance(a, bytes)
    assert generate(model, prompt, 20, seed=7) == a
    assert generate(model, prompt, 20, seed=8) != a
    window = generate(model, prompt, 20, seed=7, pattern="window")
    assert window == generate(model, prompt, 20, seed=7, pattern="window:16")


def test_greedy_and_top_1_pick_the_likeliest_byte_never_bos():
    model = Favourite(ord("z"))
    assert generate(model, "abc", 5, temperature=0) == b"zzzzz"
    assert generate(model, "abc", 5, top_k=1, seed=0) == b"zzzzz"
    assert model.calls[1:6] == [4, 5, 6, 7, 8]  # after the length check: BOS + prompt + generated so far
    assert generate(model, "", 0) == b""


def test_a_length_the_scheme_cannot_reach_fails_before_the_first_byte():
    model = tiny_gpt("learned", train_len=16)
    assert len(generate(model, b"ab", 14, seed=0)) == 14  # positions 0..15: inside the table
    stream = iter_generate(model, b"ab", 15, seed=0)
    with pytest.raises(ValueError, match="cannot continue a 2-byte prompt by 15 bytes.*learned"):
        next(stream)


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_bytes=-1), "--bytes must be an integer >= 0"),
    (dict(n_bytes=4, temperature=-0.5), "temperature must be >= 0"),
    (dict(n_bytes=4, top_k=0), "--top-k must be a positive integer"),
])
def test_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        generate(tiny_gpt(), b"x", **kwargs)


# -- lexkit sample --------------------------------------------------------------------------------
def make_run(tmp_path, scheme="rope", train_len=16):
    return save_run(tmp_path, tiny_gpt(scheme, train_len=train_len))


def test_cli_sample_is_deterministic_with_a_seed(tmp_path, capsys):
    run = make_run(tmp_path)
    argv = ["sample", str(run), "--prompt", "import os\n", "--bytes", "12", "--seed", "3"]
    assert main(argv) == 0
    first = capsys.readouterr()
    assert main(argv) == 0
    second = capsys.readouterr()
    assert first.out == second.out and first.out.startswith("import os\n") and first.err == ""
    model, _ = lexkit.training.runs.load(run)
    expected = generate(model, "import os\n", 12, seed=3).decode("utf-8", errors="replace")
    assert first.out == "import os\n" + expected + "\n"
    assert main(argv + ["--continuation-only"]) == 0
    assert capsys.readouterr().out == expected + "\n"


def test_cli_sample_prints_the_seed_it_drew_and_none_when_greedy(tmp_path, capsys, monkeypatch):
    """Sampling without --seed prints the seed on stderr, and that seed repeats the text; greedy
    (--temperature 0) draws nothing and prints no seed line. --threads past the cores: one warning."""
    from lexkit.core import threads

    monkeypatch.setenv("LEXKIT_THREADS", "1")  # (the policy's own line aside)
    run = make_run(tmp_path)
    argv = ["sample", str(run), "--prompt", "ab", "--bytes", "12", "--continuation-only"]
    assert main(argv) == 0
    drawn = capsys.readouterr()
    assert drawn.err.startswith("seed ") and len(drawn.err.splitlines()) == 1
    assert main(argv + ["--seed", drawn.err.split()[1]]) == 0 and capsys.readouterr().out == drawn.out
    assert main(argv + ["--temperature", "0"]) == 0
    greedy = capsys.readouterr()
    loaded = lexkit.training.runs.load(run)[0]
    assert greedy.err == "" and greedy.out == generate(loaded, "ab", 12, temperature=0).decode(
        "utf-8", errors="replace") + "\n"
    monkeypatch.setattr(threads, "cores", lambda: 2)
    monkeypatch.setattr(threads, "use", lambda n, what: used.append(n))  # (no 64 threads started here)
    used = []
    assert main(argv + ["--temperature", "0", "--threads", "64"]) == 0 and used == [64]
    assert capsys.readouterr().err.splitlines() == ["warning: --threads 64 is more threads than the 2 cores this "
                                                    "process may run on: running 64 all the same, but threads past "
                                                    "the cores wait on each other at every parallel region "
                                                    "(docs/threads.md); 2 or fewer is faster"]


def test_cli_sample_bad_input(tmp_path, capsys):
    run = make_run(tmp_path, "learned", train_len=16)
    assert main(["sample", str(run), "--bytes", "40", "--seed", "0"]) == 2
    assert "learned" in one_error_line(capsys)
    assert capsys.readouterr().out == ""  # nothing printed before the error
    assert main(["sample", str(run), "--pattern", "nope"]) == 2
    assert "unknown attention pattern" in one_error_line(capsys)
    assert main(["sample", str(tmp_path / "missing")]) == 2
    assert "does not exist" in one_error_line(capsys)


# -- KV-cached generation -------------------------------------------------------------------------
#: the decoding loop (attention.cache.decode) is the same for every scheme; what differs by scheme is the model's
#: cached forward, pieces of several tokens and of one, under causal, window:12 and bca:12, and that runs for every
#: kind in test_stream's test_streamed_losses_equal_one_pass_for_every_scheme (the same calls, at 1e-5 on the
#: losses): here three kinds in the fast suite (rotated keys, a learned bias table grown on demand, positions
#: added to the input), the other kinds slow (0.15-0.3 s each)
GREEDY_FAST = ("rope", "t5", "sinusoidal")


@pytest.mark.parametrize("scheme", [name if name in GREEDY_FAST else pytest.param(name, marks=pytest.mark.slow)
                                    for name in lexkit.positions.names()])
def test_greedy_with_the_cache_equals_greedy_without_for_every_pattern(scheme, monkeypatch):
    """Token for token, past the training length and W, with the prompt prefilled in segments of 7
    (monkeypatched) so the segmented prefill runs too; the cached path feeds one token a step."""
    monkeypatch.setattr(lexkit.attention.cache, "SEGMENT", 7)  # the one decoding loop's (attention.cache.decode)
    model = tiny_gpt(scheme, max_len=128)
    with torch.no_grad():  # sharper than the init (which repeats one byte), so greedy outputs vary
        for name, p in model.named_parameters():
            if p.dim() == 2 and not name.startswith("embed"):
                p.mul_(15)
    prompt = b"for i in range(3):\n"  # 19 bytes + BOS
    outputs = {}
    for pattern in ("causal", "window:12", "bca:12"):
        seen = []
        handle = model.embed.register_forward_hook(lambda m, args, out, seen=seen: seen.append(args[0].shape[1]))
        cached = generate(model, prompt, 16, pattern=pattern, temperature=0, cache=True)
        handle.remove()
        assert seen == [1, 7, 7, 6] + [1] * 15  # the length probe, the prefill, then one token a step
        assert cached == generate(model, prompt, 16, pattern=pattern, temperature=0, cache=False), (scheme, pattern)
        outputs[pattern] = cached
    assert len(set(b"".join(outputs.values()))) >= 8  # not one byte repeated: the comparison has teeth
    assert generate(model, prompt, 12, pattern="window:12", temperature=0) == outputs["window:12"][:12]  # auto: cached


def test_cached_sampling_is_seeded_and_the_cache_option_is_checked():
    model = tiny_gpt("alibi")
    a = generate(model, b"x = ", 16, seed=5, cache=True)
    assert generate(model, b"x = ", 16, seed=5, cache=True) == a
    assert generate(model, b"x = ", 16, seed=6, cache=True) != a
    with pytest.raises(ValueError, match="--cache.*kernel 'dense' cannot"):
        generate(model, b"x", 3, cache=True, kernel="dense")
    with pytest.raises(ValueError, match="needs a model with a KV cache"):
        generate(Favourite(1), b"x", 3, cache=True)
    learned = tiny_gpt("learned", train_len=16)
    with pytest.raises(ValueError, match="cannot continue a 2-byte prompt by 15 bytes.*learned"):
        generate(learned, b"ab", 15, seed=0, cache=True)


def test_cli_sample_cache_flags(tmp_path, capsys, monkeypatch):
    from lexkit.attention import kernels

    run = make_run(tmp_path)
    argv = ["sample", str(run), "--prompt", "ab", "--bytes", "16", "--temperature", "0", "--pattern", "window:8"]
    assert main(argv + ["--cache"]) == 0
    with_cache = capsys.readouterr().out
    assert main(argv + ["--no-cache"]) == 0
    assert capsys.readouterr().out == with_cache
    assert main(argv + ["--cache", "--kernel", "flex"]) == 2  # on the CPU flex is refused before anything loads
    assert "kernel 'flex' runs on CUDA only" in one_error_line(capsys)
    monkeypatch.setattr(kernels.choice, "CPU_FLEX_REFUSAL", None)  # as on CUDA: the cache's own refusal
    assert main(argv + ["--cache", "--kernel", "flex"]) == 2
    assert "kernel 'flex' cannot run through a KV cache" in one_error_line(capsys)


def test_cli_sample_refusals_name_samples_own_flags(tmp_path, capsys):
    """A cache that cannot run is refused in sample's words (--no-cache), never eval's (--no-stream)."""
    run = make_run(tmp_path)
    assert main(["sample", str(run), "--bytes", "4", "--cache", "--pattern", "sinks:8,pos=cache"]) == 2
    line = one_error_line(capsys)
    assert "--no-cache" in line and "--no-stream" not in line and "pos=cache" in line


def test_a_subjects_greedy_continuation_runs_the_same_decoding_loop_with_and_without_the_cache(monkeypatch):
    """lexkit.attention.cache.decode serves sample.generate and a subject's greedy alike: a run
    subject's tokens through the cache (prefill in segments of 7) are its tokens without it."""
    from lexkit.instruments.subject import RunSubject

    monkeypatch.setattr(lexkit.attention.cache, "SEGMENT", 7)
    model = tiny_gpt("alibi", max_len=128)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2 and not name.startswith("embed"):
                p.mul_(15)
    subject = RunSubject.of(model)
    tokens = torch.tensor([256, *b"for i in range(3):\n"])
    cached = subject.generate(tokens, 20, pattern="window:12", cache=True)
    assert torch.equal(cached, subject.generate(tokens, 20, pattern="window:12", cache=False))
    assert len(set(cached.tolist())) >= 4 and cached.dtype == torch.int64
