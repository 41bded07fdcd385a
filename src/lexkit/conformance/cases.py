"""The battery: each method at its defaults and at its edges, each case one line of why.

A :class:`Case` is a config, the calls made to one embedding in order (each the positions of one
forward pass; the current length is max + 1; a case of ``batch`` B > 1 makes each call B sequences of
equal count at once, the call's positions row after row, each row's current length its own) and the
checks asked. Against the reference unless it is
a *property* (``twin``): then the implementation is compared with itself under the twin config (at
positions shifted by ``shift``; only pairs with |m - n| < ``within`` for ReRoPE's window), and needs no
second implementation. A case with ``refuse`` passes when the implementation refuses the config. A
``causal`` case compares the scores of pairs m >= n only: a scheme defined for causal attention (ReRoPE,
whose reference code clamps |m - n| where lexkit's keeps m - n) has no score where the mask hides one.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, replace

import torch

from .config import RopeConfig, hybrid


@dataclass(frozen=True)
class Case:
    name: str
    config: RopeConfig
    calls: tuple[tuple[int, ...], ...]
    checks: tuple[str, ...] = ("frequencies", "tables", "rotate")
    why: str = ""
    refuse: bool = False
    twin: RopeConfig | None = None
    shift: int = 0
    within: int | None = None
    causal: bool = False  # scores compared for m >= n only (the pairs causal attention sees)
    batch: int = 1  # sequences per call (their positions one after the other, equally many each)

    def rows(self, call: int):
        """The positions of call ``call`` as [batch, n] (int64)."""
        return torch.tensor(self.calls[call], dtype=torch.long).view(self.batch, -1)

    @property
    def group(self) -> str:
        return self.name.split("/")[0]

    @property
    def property(self) -> bool:
        return self.twin is not None

    def __str__(self) -> str:
        return self.name


def around(L: int, top: int) -> tuple[int, ...]:
    """Chosen positions below, at and above the original length L, up to ``top`` - 1."""
    points = {0, 1, 2, 37, L // 2, L - 1, L, L + 1, 2 * L - 1, 3 * L + 5, top - 1}
    return tuple(sorted(p for p in points if 0 <= p < top))


def length(n: int) -> tuple[int, ...]:
    """A call of current length n: positions 0, 1, n/2 and n - 1."""
    return tuple(sorted({0, 1, n // 2, n - 1}))


def _longrope_factors(pairs: int, s: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Deterministic short and long factor lists shaped like Phi-3's (short near 1, long rising
    from 1 at the highest frequency to about s at the lowest)."""
    short = tuple(round(1.0 + 0.05 * (i / max(pairs - 1, 1)) ** 2, 6) for i in range(pairs))
    long = tuple(round(1.0 + (s - 1.0) * (i / max(pairs - 1, 1)) ** 1.5, 6) for i in range(pairs))
    return short, long


ROPE = RopeConfig()
F, T, R, S = "frequencies", "tables", "rotate", "scores"
MILLION = (1_000_000, 1_048_575, 1_048_576, 1_048_577, 1_050_000)


def _battery() -> list[Case]:
    c: list[Case] = []

    def add(name, config, calls, checks=(F, T, R), why="", **kw):
        c.append(Case(name, config, tuple(tuple(x) for x in calls), tuple(checks), why, **kw))

    # -- plain RoPE ------------------------------------------------------------------------------
    add("rope/default", ROPE, [around(4096, 8192)],
        why="θ_i = 10000^(-2i/64); catches a default scale where none is configured")
    for h, why in ((18, "9 pairs: an odd number of pairs"), (80, "not a power of two"), (256, "Gemma's"),
                   (512, "a large head")):
        add(f"rope/head-dim-{h}", replace(ROPE, head_dim=h), [around(4096, 8192)], why=why)
    add("rope/partial-0.25", replace(ROPE, fraction=0.25), [around(4096, 8192)],
        why="GPT-NeoX's rotary_pct: r = 16 of 64, frequencies over r")
    add("rope/partial-0.3", replace(ROPE, fraction=0.3), [around(4096, 8192)],
        why="r = 2·floor(0.3·64/2) = 18; a runtime taking int(0.3·64) = 19 rotates an odd count")
    add("rope/odd-head-dim-65", replace(ROPE, head_dim=65, fraction=0.5), [around(4096, 8192)],
        why="an odd head dim, half rotated (r = 32), the last 33 dims pass through")
    for base, why in ((5e5, "Llama 3"), (1e6, "Qwen 2/3, Gemma 3 global layers"), (1e7, "Qwen2.5-1M")):
        add(f"rope/base-{base:.0e}".replace("+0", ""), replace(ROPE, head_dim=128, base=base),
            [around(32768, 131072)], why=f"a large base ({why})")
    add("rope/positions-past-1M", replace(ROPE, head_dim=32), [MILLION],
        why="float32 arithmetic allowed (see the tolerances): the low frequencies must still be right")
    add("rope/float64-angles-past-1M", replace(ROPE, head_dim=32, dtype=torch.float64), [MILLION],
        why="a float64 table must be computed in float64: p·θ in float32 is off by up to 0.06 rad here")
    for dtype, tag in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        add(f"rope/{tag}-positions-48k-131k", replace(ROPE, head_dim=128, base=5e5, dtype=dtype),
            [(49151, 49152, 65535, 65536, 98304, 131071)],
            why=f"{tag} tables at 48k-131k: bugs that show only past 40-60k positions (mlx-vlm PR #1710: "
                "cosine 0.503 at 60k; a fast cosine off by 1e-2 at 131,071, kekzl/imp PR #1317)")
    for dtype, tag in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
        add(f"rope/{tag}-tables", replace(ROPE, dtype=dtype), [around(4096, 8192)],
            why=f"{tag} tables: cos/sin computed in float32 and rounded once (positions in {tag} would not be)")

    # -- position interpolation (linear) ---------------------------------------------------------
    lin = replace(ROPE, scaling="linear", factor=4.0)
    add("linear/factor-4", lin, [around(4096, 16384)], why="θ_i / 4; catches the base recomputed for linear scaling")
    add("linear/factor-1", replace(lin, factor=1.0), [around(4096, 8192)], why="θ_i / 1 = RoPE")
    add("linear/factor-0.5", replace(lin, factor=0.5), [length(64)], why="a factor below 1 is refused", refuse=True)
    add("linear/partial-0.5", replace(lin, factor=2.5, head_dim=128, fraction=0.5), [around(4096, 10240)],
        why="scaling over the rotated half only")
    add("linear/bf16-tables", replace(lin, dtype=torch.bfloat16), [around(4096, 16384)], why="bf16 tables")

    # -- NTK-aware, fixed ------------------------------------------------------------------------
    ntk = replace(ROPE, scaling="ntk", factor=4.0)
    add("ntk/factor-4", ntk, [around(4096, 16384)], why="base · 4^(64/62)")
    add("ntk/factor-0.5", replace(ntk, factor=0.5), [length(64)], why="a factor below 1 is refused", refuse=True)

    # -- dynamic NTK -----------------------------------------------------------------------------
    dyn = replace(ROPE, scaling="dynamic", factor=8.0, original_len=1024)
    add("dynamic/below-original", dyn, [length(n) for n in (1, 16, 100, 1023, 1024)],
        why="plain RoPE up to L: catches a negative base and NaN below L (s·n/L - (s-1) < 0)")
    add("dynamic/many-lengths", dyn, [length(n) for n in (1025, 1536, 2048, 4096, 8192, 16384)],
        why="base grows with the current length: catches a constant base")
    add("dynamic/after-longer-call", dyn, [length(8192), length(512)],
        why="back to plain RoPE below L after a longer call (transformers #27227)")
    add("dynamic/at-L-after-longer-call", dyn, [length(8192), length(1024)],
        why="plain RoPE at exactly L after a longer call: a reset only below L (seq_len < L) keeps the longer "
            "call's base here; no shorter call comes between to hide it")
    add("dynamic/shorter-than-longest", dyn, [length(8192), length(2048)],
        why="lexkit's convention: the base of each call's own length (a runtime may keep the longest's)")
    add("dynamic/factor-0.5", replace(dyn, factor=0.5), [length(64)], why="a factor below 1 is refused", refuse=True)
    add("dynamic/partial-0.25", replace(dyn, head_dim=128, fraction=0.25), [length(n) for n in (512, 4096)],
        why="GPT-NeoX's quarter: the exponent r/(r-2) over the rotated dims")

    # -- YaRN ------------------------------------------------------------------------------------
    yarn = replace(ROPE, head_dim=128, scaling="yarn", factor=4.0, original_len=4096)
    add("yarn/defaults", yarn, [around(4096, 16384)],
        why="β_fast 32, β_slow 1, a = 0.1 ln 4 + 1: catches the attention factor dropped")
    add("yarn/factor-1", replace(yarn, factor=1.0), [around(4096, 8192)], why="ramp of θ/1 and a = 1: RoPE")
    add("yarn/factor-0.5", replace(yarn, factor=0.5), [length(64)], why="a factor below 1 is refused", refuse=True)
    add("yarn/factor-32", replace(yarn, head_dim=64, factor=32.0), [around(4096, 131072)],
        why="a large factor: a = 0.1 ln 32 + 1 = 1.347")
    add("yarn/beta-16-2", replace(yarn, base=5e5, beta_fast=16.0, beta_slow=2.0), [around(4096, 16384)],
        why="β_fast and β_slow set")
    add("yarn/qwen-1e6", replace(yarn, base=1e6, original_len=32768), [around(32768, 131072)],
        why="Qwen's YaRN: base 1e6, L 32768")
    add("yarn/long-original", replace(yarn, head_dim=64, factor=2.0, original_len=65536), [around(65536, 131072)],
        why="ceil(corr(β_slow)) = 33 > r/2 - 1: the ramp's upper end is clamped to r - 1 (HF, the YaRN code)")
    add("yarn/partial-0.5", replace(yarn, fraction=0.5), [around(4096, 16384)], why="the ramp over the rotated dims")
    add("yarn/bf16-tables", replace(yarn, dtype=torch.bfloat16), [around(4096, 16384)],
        why="bf16 tables carry a")
    add("yarn/attention-factor", replace(yarn, attention_factor=1.0), [around(4096, 16384)],
        why="an explicit attention factor is a itself: catches it dropped for 0.1 ln s + 1 (vLLM PR #46280, "
            "#48351; mlx-lm PR #1507, Olmo 3)")
    add("yarn/mscale-ratio", replace(yarn, head_dim=64, factor=40.0, mscale=1.0, mscale_all_dim=0.707),
        [around(4096, 163840)], why="DeepSeek's rule: a = m(s, mscale)/m(s, mscale_all_dim), m(s, μ) = 0.1 μ ln s + 1 "
                                    "(transformers PR #47435)")
    add("yarn/mscale-equal", replace(yarn, head_dim=64, factor=16.0, mscale=1.0, mscale_all_dim=1.0),
        [around(4096, 65536)], why="mscale = mscale_all_dim (DeepSeek-V3): a = 1, not 0.1 ln s + 1 (vLLM #48621 "
                                   "gave 1.2773; exllamav3 #259)")
    add("yarn/mscale-alone", replace(yarn, mscale=0.707), [around(4096, 16384)],
        why="mscale without mscale_all_dim is ignored (transformers' rule, lexkit's); DeepSeek's code and mlx-lm "
            "count it: a convention")
    add("yarn/truncate-false", replace(yarn, head_dim=64, base=150000.0, factor=32.0, truncate=False),
        [around(4096, 131072)], why="gpt-oss: truncate false keeps the ramp's ends unrounded (no floor, ceil)")

    # -- Llama 3 ---------------------------------------------------------------------------------
    l3 = replace(ROPE, head_dim=128, base=5e5, scaling="llama3", factor=8.0, original_len=8192)
    add("llama3/defaults", l3, [around(8192, 131072)], why="Llama 3.1: s 8, low 1, high 4, L 8192")
    add("llama3/bands", replace(ROPE, scaling="llama3", factor=4.0, original_len=128, low_freq=2.0, high_freq=8.0),
        [around(128, 512)], why="all three bands populated (kept, smoothed, divided by s)")
    add("llama3/llama-3.2", replace(l3, head_dim=64, factor=32.0), [around(8192, 131072)], why="Llama 3.2: s 32")
    add("llama3/factor-1", replace(l3, factor=1.0), [around(8192, 16384)], why="every band gives θ: RoPE")
    add("llama3/factor-0.5", replace(l3, factor=0.5), [length(64)], why="a factor below 1 is refused", refuse=True)

    # -- LongRoPE --------------------------------------------------------------------------------
    short, long = _longrope_factors(48, 32.0)
    lr = replace(ROPE, head_dim=96, scaling="longrope", factor=32.0, original_len=4096, short_factor=short,
                 long_factor=long)
    add("longrope/short", lr, [length(4096)], why="n <= L: short factors; a = sqrt(1 + ln 32 / ln 4096)")
    add("longrope/long", lr, [length(131072)], why="n > L: long factors")
    add("longrope/switch", lr, [length(4096), length(4097), length(2048)],
        why="short at L, long at L + 1, short again after the longer call")
    s75, l75 = _longrope_factors(48, 32.0)
    add("longrope/around-L", lr, [length(4095), length(4096), length(4097), length(4095)],
        why="the switch reads the sequence: short at L - 1 and at L, long at L + 1 (unsloth PR #10681 took the "
            "long branch at L), short again")
    add("longrope/allocated-context", replace(lr, context=131072), [length(2048), length(4096), length(8192)],
        why="a runtime allocated for 32·L (context 131,072) still chooses by the sequence: short factors at 2,048 "
            "and at L, long at 8,192 (llama.cpp #24823 chose by the allocated context; vLLM PR #27431 does on purpose)")
    add("longrope/partial-0.75", replace(lr, head_dim=128, fraction=0.75, short_factor=s75, long_factor=l75),
        [length(2048), length(65536)], why="Phi-4-mini's 3/4 rotated")
    add("longrope/factor-1", replace(lr, factor=1.0), [length(4096), length(8192)], why="a = 1 at s = 1")

    # -- hybrid models: a RoPE per layer type ------------------------------------------------------
    olmo = {"sliding_attention": ROPE,
            "full_attention": replace(ROPE, base=5e5, scaling="yarn", factor=8.0, original_len=4096)}
    add("hybrid/olmo3-sliding", hybrid("sliding_attention", "olmo3", **olmo), [around(4096, 32768)],
        why="sliding layers keep unscaled RoPE beside YaRN full layers (OLMo 3)")
    add("hybrid/olmo3-full", hybrid("full_attention", "olmo3", **olmo), [around(4096, 32768)],
        why="the full layers' YaRN")
    olmo_exact = {**olmo, "full_attention": replace(olmo["full_attention"], truncate=False)}
    add("hybrid/olmo3-full-truncate-false", hybrid("full_attention", "olmo3", **olmo_exact), [around(4096, 32768)],
        why="a layer type's own truncate false (Olmo 3's full layers), not the top level's default true")
    gemma = {"sliding_attention": ROPE, "full_attention": replace(ROPE, base=1e6, scaling="linear", factor=8.0)}
    add("hybrid/gemma3-sliding", hybrid("sliding_attention", "gemma3", **gemma), [around(4096, 32768)],
        why="Gemma 3: local layers base 1e4 unscaled")
    add("hybrid/gemma3-full", hybrid("full_attention", "gemma3", **gemma), [around(4096, 32768)],
        why="Gemma 3: global layers base 1e6, linear 8")

    # -- xPos ------------------------------------------------------------------------------------
    xpos = replace(ROPE, scheme="xpos")
    pts = (0, 1, 5, 100, 511, 512, 1000, 2047)
    add("xpos/decay", xpos, [pts], checks=(F, S), why="scores carry ζ_i^((m-n)/B), γ 0.4, B 512")
    add("xpos/linear-2", replace(xpos, scaling="linear", factor=2.0), [pts], checks=(F, S), why="xPos under PI")
    add("xpos/partial-0.5", replace(xpos, head_dim=128, fraction=0.5), [pts], checks=(F, S),
        why="xPos on the first r = h/2 dims: ζ_i over r (2i + γr)/((1 + γ)r), the rest neither rotated nor decayed")

    # -- pair layouts ----------------------------------------------------------------------------------
    add("pairs/interleaved", replace(ROPE, pairs="interleaved"), [around(4096, 8192)],
        why="pairs (2i, 2i + 1) (GPT-J, torchtune): a runtime that declares one layout and computes the other "
            "fails (apple/coreai-models #66)")
    add("pairs/interleaved-partial-0.5", replace(ROPE, head_dim=128, fraction=0.5, pairs="interleaved"),
        [around(4096, 8192)], why="interleaved pairs in the rotated half only, the rest passed through")

    # -- prefill, then a one-token decode at a position the prefill had ------------------------------
    for name, cfg, n in (("rope", ROPE, 4096), ("yarn", yarn, 16384), ("dynamic", dyn, 4096),
                         ("llama3", l3, 16384), ("longrope", lr, 8192)):
        add(f"decode/{name}", cfg, [length(n), (n - 1,), (n - 2, n - 1)],
            why="a prefill of n, then one-token decode calls at n - 1 (current length n): one table both ways "
                "(prefill and decode tables apart: Xilinx mlir-air PR #1948)")

    # -- a batch: sequences of different lengths in one forward pass ---------------------------------
    for name, cfg, short, long in (("dynamic", dyn, 1024, 8192), ("longrope", lr, 2048, 8192),
                                   ("yarn", yarn, 4096, 16384)):
        add(f"batch/{name}", cfg, [length(short) + length(long)], checks=("rotate_batch",), batch=2,
            why=f"two sequences in one forward, {short:,} and {long:,} long: each rotated by its own length "
                "(a runtime that reads max(position_ids) + 1 or any(positions > L) over the batch scales the "
                "short one by the long one's" + ("; YaRN is static: the control" if name == "yarn" else ")"))

    # -- properties: an implementation against itself --------------------------------------------
    add("property/dynamic-is-rope-up-to-L", dyn, [length(n) for n in (16, 512, 1024)], twin=ROPE,
        why="dynamic NTK equals plain RoPE up to the original length")
    for name, cfg in (("linear", lin), ("yarn", yarn), ("llama3", l3)):
        one = replace(cfg, factor=1.0)
        add(f"property/{name}-factor-1-is-rope", one, [around(4096, 8192)], twin=replace(one, scaling="none",
            factor=None, original_len=None), why=f"{name} at factor 1 equals RoPE")
    add("property/xpos-no-decay-is-rope", replace(xpos, decay=False), [pts], checks=(S,), twin=ROPE,
        why="xPos without its decay is RoPE")
    rerope = replace(ROPE, scheme="rerope", window=64)
    near = tuple(range(0, 160, 7))
    # ReRoPE is defined for causal attention: its cases compare the pairs m >= n (causal=True)
    add("property/rerope-is-rope-in-window", rerope, [near], checks=(S,), twin=ROPE, within=64, causal=True,
        why="ReRoPE equals RoPE for 0 <= m - n < w (causal pairs)")
    add("property/leaky-rerope-is-rope-in-window", replace(rerope, leak=16.0), [near], checks=(S,), twin=ROPE,
        within=64, causal=True, why="leaky ReRoPE too")
    far = tuple(range(0, 200, 4))  # pairs inside w = 64, at m - n = w and past it
    add("rerope/past-window", rerope, [far], checks=(S,), causal=True,
        why="ReRoPE against the reference past w: the relative position held at w for m - n >= w (causal pairs)")
    add("rerope/leaky-past-window", replace(rerope, leak=16.0), [far], checks=(S,), causal=True,
        why="leaky ReRoPE past w: w + (m - n - w)/k; a clamp at another w or another k fails (causal pairs)")
    for name, cfg in (("rope", ROPE), ("yarn", yarn), ("llama3", l3), ("xpos", xpos), ("rerope", rerope)):
        add(f"property/translation-{name}", cfg, [near], checks=(S,), twin=cfg, shift=1000,
            causal=name == "rerope", why="scores depend on m - n only: shifting every position by 1000 changes nothing")
    return c


CASES: tuple[Case, ...] = tuple(_battery())


def cases(patterns: list[str] | None = None) -> list[Case]:
    """The cases whose names match any of the glob ``patterns`` (all without); ValueError for a
    pattern that matches none, naming the groups."""
    if not patterns:
        return list(CASES)
    out = []
    for pattern in patterns:
        hit = [c for c in CASES if fnmatch.fnmatchcase(c.name, pattern) or c.group == pattern]
        if not hit:
            groups = ", ".join(dict.fromkeys(c.group for c in CASES))
            raise ValueError(f"--case {pattern!r} matches no case; groups: {groups} (a glob such as 'yarn/*' "
                             f"or a case name; `lexkit conformance --list` lists them)")
        out += [c for c in hit if c not in out]
    return out
