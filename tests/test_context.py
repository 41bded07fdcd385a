"""Context extension: log-n scaling, ReRoPE, attention sinks, the instruments over them,
`lexkit train --init` and evaluation under another scheme (the RoPE scalings: test_scaling.py).

Every expected value is written out here from the formulas (docs/context-extension.md), in plain
Python / float64, independently of lexkit's implementation."""

import hashlib
import json
import math

import pytest
import torch

from cli_checks import one_error_line
from kit import rel
from lexkit import attention, positions, resolution
from lexkit.attention import Attention
from lexkit.attention.modifiers import LogN, Scoring
from lexkit.cli import main
from rope_formulas import written_out

H, HD = 2, 16


# -- 2. log-n scaling ----------------------------------------------------------------------------
def lam(m, L):
    return max(1.0, math.log(m + 1) / math.log(L))


def reference(scheme, pattern, q, k, v, pos, *, logn=None, distance=None):
    """softmax over visible keys of λ_m·score(m, n), float64, pair by pair from the definitions:
    score from the scheme's reference path (or at the given per-pair ``distance`` for rotary/bias
    schemes at cache positions)."""
    n = pos.shape[0]
    idx = torch.arange(n)
    s = scheme.scores(q, k, pos, pos)  # [b, h, n, n]
    if distance is not None:
        s = distance(s)
    if logn is not None:
        s = s * torch.tensor([lam(int(m), logn) for m in pos], dtype=s.dtype)[:, None]
    s = s.masked_fill(~pattern.visible(idx[:, None], idx[None, :]), -math.inf)
    return torch.softmax(s, -1) @ v


def qkv(n, batch=1, dtype=torch.float32):
    return tuple(torch.randn(batch, H, n, HD, dtype=dtype) for _ in range(3))


def check_logn(spec, pat, kernels):
    """Each kernel under log-n (training length 16) within 1e-4 of the float64 reference at 130 tokens."""
    s = positions.create(spec, n_heads=H, head_dim=HD, max_len=512)
    pattern = attention.create(pat)
    n, L = 130, 16
    pos = torch.arange(3, 3 + n)
    q, k, v = qkv(n)
    with torch.no_grad():
        want = reference(s, pattern, q.double(), k.double(), v.double(), pos, logn=L)
        plain = reference(s, pattern, q.double(), k.double(), v.double(), pos)
        assert rel(plain, want) > 1e-3  # log-n changes the output here
        for kernel in kernels:
            att = Attention(s, pattern, pos, kernel=kernel, scoring=Scoring.of(LogN(L=L)))
            got = att(q, k, v)
            assert att.ran == kernel and rel(got, want) <= 1e-4, (spec, pat, kernel, att.ran, rel(got, want))


@pytest.mark.parametrize("spec, pat, kernels", [
    ("rope", "causal", ("dense", "chunked")),
    ("alibi", "window:48", ("dense", "chunked")),
    ("xpos", "bca:32", ("dense", "chunked")),
    ("rope:scaling=yarn,factor=4,original_len=16", "causal", ("dense", "chunked")),
    ("t5", "causal", ("dense", "chunked")),
])
def test_logn_on_every_kernel_equals_the_reference(spec, pat, kernels):
    check_logn(spec, pat, kernels)


#: λ in q and in the bias score_mod: Sandwich's (a captured table gathered by distance, divided per head), whose
#: one fast run on flex this is (test_kernels' FAST_EAGER leaves it to the slow grid). A scheme without a bias
#: takes λ in q alone, by the same line of the flex path (and no score_mod, as test_kernels' eager rope case):
#: ("rope", "causal"), one more trace of eager flex (0.3-0.5 s), is slow
LOGN_FLEX = [("sandwich", "window:48"), pytest.param("rope", "causal", marks=pytest.mark.slow)]


@pytest.mark.parametrize("spec, pat", LOGN_FLEX)
def test_logn_on_flex_run_eagerly_equals_the_reference(spec, pat, eager_flex):
    """lexkit's flex path under log-n (λ in q and in the bias score_mod, the block mask, the
    ladder) with FlexAttention run eagerly (compiled flex is refused on the CPU)."""
    check_logn(spec, pat, ("flex",))


def test_logn_is_identity_inside_the_training_length_and_grows_as_written():
    from lexkit.attention.modifiers import logn_scale

    got = logn_scale(torch.arange(0, 1000), 128)
    want = torch.tensor([lam(m, 128) for m in range(1000)], dtype=torch.float32)
    assert torch.equal(got[:128], torch.ones(128)) and torch.allclose(got, want, rtol=1e-6)
    assert got[255] == pytest.approx(math.log(256) / math.log(128))
    with pytest.raises(ValueError, match="training length"):
        logn_scale(torch.arange(4), 1)


# -- 3. ReRoPE and leaky ReRoPE ------------------------------------------------------------------
def rope_score_at(q, k, r, h=HD, base=10000.0):
    """q·R(r)k/√h for plain RoPE at relative position r (pairs i, i + h/2), float64."""
    tot = 0.0
    for i in range(h // 2):
        j = i + h // 2
        ang = r * base ** (-2 * i / h)
        tot += (q[i] * k[i] + q[j] * k[j]) * math.cos(ang) + (q[i] * k[j] - q[j] * k[i]) * math.sin(ang)
    return float(tot) / math.sqrt(h)


@pytest.mark.parametrize("w, leak", [(5, math.inf), (5, 4.0), (1, 16.0)])
def test_rerope_scores_use_the_clamped_relative_position(w, leak):
    spec = f"rerope:w={w}" + ("" if math.isinf(leak) else f",k={leak}")
    s = positions.create(spec, n_heads=1, head_dim=HD)
    q, k = torch.randn(1, 1, 12, HD, dtype=torch.float64), torch.randn(1, 1, 12, HD, dtype=torch.float64)
    pos = torch.arange(100, 112)
    got = s.scores(q, k, pos, pos)[0, 0]
    for m in range(12):
        for n in range(m + 1):
            d = m - n
            r = d if d < w else w + (d - w) / leak
            assert float(got[m, n]) == pytest.approx(rope_score_at(q[0, 0, m], k[0, 0, n], r), rel=1e-9, abs=1e-12)


def test_rerope_runs_on_dense_and_chunked_and_flex_refuses():
    s = positions.create("rerope:w=20,k=8", n_heads=H, head_dim=HD)
    for pat in ("causal", "window:64"):
        pattern = attention.create(pat)
        n = 300  # two chunked blocks
        pos = torch.arange(n)
        q, k, v = qkv(n)
        with torch.no_grad():
            want = reference(s, pattern, q.double(), k.double(), v.double(), pos, logn=40)
            for kernel in ("dense", "chunked", "auto"):
                got = Attention(s, pattern, pos, kernel=kernel, scoring=Scoring.of(LogN(L=40)))(q, k, v)
                assert rel(got, want) <= 1e-4, (pat, kernel)
    with pytest.raises(ValueError, match="flex.*rerope.*'dense' or 'chunked'"):
        Attention(s, attention.create("causal"), torch.arange(8), kernel="flex")
    # inside w it is RoPE exactly
    rope = positions.create("rope", n_heads=H, head_dim=HD)
    q, k, _ = qkv(20, dtype=torch.float64)
    p = torch.arange(20)
    assert torch.allclose(s.scores(q, k, p, p).tril(), rope.scores(q, k, p, p).tril(), atol=1e-12)


# -- 4. attention sinks --------------------------------------------------------------------------
def test_sinks_predicate_keys_and_spec():
    p = attention.create("sinks:5,K=2")
    assert p.spec == "sinks:5,K=2" and attention.create(p.spec) == p
    assert attention.create("sinks", default_window=64).spec == "sinks:64"
    for m in range(30):
        for n in range(30):
            assert bool(p.visible(torch.tensor(m), torch.tensor(n))) == (n <= m and (n < 2 or m - n < 5))
    for start, stop in ((0, 4), (8, 12), (20, 30)):  # the key set is exactly every key some query sees
        keys = set(p.keys(start, stop).tolist())
        seen = {n for m in range(start, stop) for n in range(30) if n <= m and (n < 2 or m - n < 5)}
        assert seen <= keys and keys <= set(range(stop)) and len(keys) <= 2 + 5 + (stop - start)
    with pytest.raises(ValueError, match="pos=disk.*text or cache"):
        attention.create("sinks:8,pos=disk")


def check_sinks_text(spec, kernels):
    """Each kernel under sinks:40,K=3 (sinks at their text positions) within 1e-4 of the reference at 300 tokens."""
    s = positions.create(spec, n_heads=H, head_dim=HD)
    pattern = attention.create("sinks:40,K=3")
    n = 300
    pos = torch.arange(n)
    q, k, v = qkv(n)
    with torch.no_grad():
        want = reference(s, pattern, q.double(), k.double(), v.double(), pos)
        for kernel in kernels:
            att = Attention(s, pattern, pos, kernel=kernel)
            assert rel(att(q, k, v), want) <= 1e-4 and att.ran == kernel, (kernel, att.ran)


@pytest.mark.parametrize("spec, kernels", [("rope", ("dense", "chunked")), ("alibi", ("dense", "chunked"))])
def test_sinks_text_positions_on_every_kernel(spec, kernels):
    check_sinks_text(spec, kernels)


# fast sibling: test_kernels' eager flex case kerple-power under sinks:64 (the sinks block mask with the sinks at
# their text positions and a bias score_mod, gradients included); alibi's score_mod on flex:
# test_layer_modifiers.py's test_sit_and_a_soft_cap_run_in_flex_score_mod
@pytest.mark.slow
def test_sinks_text_positions_on_flex_run_eagerly(eager_flex):
    """The sinks block mask and alibi's score_mod through lexkit's flex path, FlexAttention run
    eagerly (compiled flex is refused on the CPU)."""
    check_sinks_text("alibi", ("flex",))


@pytest.mark.parametrize("spec", ["rope", "alibi", "rerope:w=10"])
def test_sinks_cache_positions_score_sinks_at_their_cache_distance(spec, monkeypatch):
    """pos=cache: a sink n is at distance min(m, K + W - 1) - n; window keys at m - n. 100 queries, past the
    cache's K + W - 1 = 42 slots, in chunked blocks of 32 (each block rescoring its sinks)."""
    monkeypatch.setattr("lexkit.attention.kernels.step.CHUNK", 32)
    K, W, n = 3, 40, 100
    s = positions.create(spec, n_heads=H, head_dim=HD)
    pattern = attention.create(f"sinks:{W},K={K},pos=cache")
    pos = torch.arange(7, 7 + n)
    q, k, v = qkv(n)
    qd, kd, vd = q.double(), k.double(), v.double()

    def cache_distance(scores):
        out = scores.clone()
        for m in range(n):
            slot = min(m, K + W - 1)
            qp = torch.tensor([pos[0] + slot])
            out[..., m, :K] = s.scores(qd[..., m : m + 1, :], kd[..., :K, :], qp, pos[:K])[..., 0, :]
        return out

    with torch.no_grad():
        want = reference(s, pattern, qd, kd, vd, pos, distance=cache_distance)
        text = reference(s, pattern, qd, kd, vd, pos)
        if spec.startswith("rerope"):  # sinks lie beyond w either way: both clamp to w, exactly equal
            assert rel(text, want) < 1e-12
        else:
            assert rel(text, want) > 1e-4  # the two position assignments differ
        for kernel in ("dense", "chunked"):
            assert rel(Attention(s, pattern, pos, kernel=kernel)(q, k, v), want) <= 1e-4, kernel
    with pytest.raises(ValueError, match="kernel 'flex' cannot run (pattern sinks|scheme rerope)"):
        Attention(s, pattern, pos, kernel="flex")
    if spec == "alibi":  # the cache distance written out for a bias: -slope·(min(m, K+W-1) - n)
        slopes = s.slopes.double()
        sc = cache_distance(s.scores(qd, kd, pos, pos))
        m = 90
        for j in range(K):
            content = float(qd[0, 1, m] @ kd[0, 1, j]) / math.sqrt(HD)
            assert float(sc[0, 1, m, j]) == pytest.approx(content - float(slopes[1]) * (K + W - 1 - j), rel=1e-9)


def test_sinks_cache_positions_refused_for_absolute_schemes():
    s = positions.create("sinusoidal", n_heads=H, head_dim=HD)
    with pytest.raises(ValueError, match="relative scheme.*pos=text"):
        Attention(s, attention.create("sinks:8,pos=cache"), torch.arange(16))


# -- 5. the instruments --------------------------------------------------------------------------
def test_analytic_curve_of_yarn_is_the_closed_form():
    """q = k = ones: s[n] = (2 a²/√h) Σ_i cos(n θ'_i) with YaRN's θ' and a."""
    N, L = 300, 64
    curve = resolution.analytic_curve("rope:scaling=yarn,factor=8", N, heads=1, head_dim=32, train_len=L)[0]
    th, a = written_out("yarn", 32, 10000.0, 8.0, L)
    want = torch.tensor([2 * a * a / math.sqrt(32) * sum(math.cos(n * t) for t in th) for n in range(N)],
                        dtype=torch.float64)
    assert torch.allclose(curve, want, atol=1e-9)
    # log-n: the query at N-1 scales its whole curve by ln N / ln L
    scaled = resolution.analytic_curve("rope:scaling=yarn,factor=8", N, heads=1, head_dim=32, train_len=L, logn=True)[0]
    assert torch.allclose(scaled, want * math.log(N) / math.log(L), atol=1e-9)
    with pytest.raises(ValueError, match="training length"):
        resolution.analytic_curve("rope", N, logn=True)


def test_analytic_curve_of_rerope_is_flat_past_w_and_dynamic_reads_the_length():
    c = resolution.analytic_curve("rerope:w=50", 200, heads=1, head_dim=32)[0]
    assert torch.allclose(c[50:], c[50].expand(150), atol=1e-12)
    rope = resolution.analytic_curve("rope", 200, heads=1, head_dim=32)[0]
    assert torch.allclose(c[:50], rope[:50], atol=1e-12)
    # dynamic NTK: the curve at length N uses base' of N (HF's seq_len = N)
    dyn = resolution.analytic_curve("rope:scaling=dynamic,factor=4", 256, heads=1, head_dim=32, train_len=64)[0]
    th, _ = written_out("dynamic", 32, 10000.0, 4.0, 64, n=256)
    want = [2 / math.sqrt(32) * sum(math.cos(n * t) for t in th) for n in range(256)]
    assert torch.allclose(dyn, torch.tensor(want, dtype=torch.float64), atol=1e-9)


def test_analytic_curve_under_sinks():
    N, W, K = 100, 20, 4
    text = resolution.analytic_curve("alibi", N, f"sinks:{W},K={K}", heads=2, head_dim=16)
    cache = resolution.analytic_curve("alibi", N, f"sinks:{W},K={K},pos=cache", heads=2, head_dim=16)
    s = positions.create("alibi", n_heads=2, head_dim=16)
    slopes = s.slopes.double()
    # text positions: every distance some query sees is finite (sinks are seen at all distances)
    assert torch.isfinite(text).all()
    assert float(text[1, 90]) == pytest.approx(4.0 - float(slopes[1]) * 90)  # √h = 4 from q = k = ones
    # cache positions: the query at N-1 sees the window and the sinks at text distances N-1-j,
    # scored at cache distance K+W-1-j; nothing else
    for d in range(N):
        j = N - 1 - d
        if d < W:
            assert float(cache[1, d]) == pytest.approx(4.0 - float(slopes[1]) * d)
        elif j < K:
            assert float(cache[1, d]) == pytest.approx(4.0 - float(slopes[1]) * (K + W - 1 - j))
        else:
            assert cache[1, d] == -math.inf
    doc = resolution.analytic("rope:scaling=yarn,factor=4", [64, 256], "sinks", heads=2, head_dim=16, train_len=32)
    assert doc["pattern"] == "sinks:32" and doc["train_len"] == 32
    assert all(0 < r["resolution"] <= 1 for r in doc["results"])


def test_resolution_cli_analytic_takes_train_len_and_logn(capsys, tmp_path):
    js = tmp_path / "r.json"
    assert main(["resolution", "--scheme", "rope:scaling=yarn,factor=4", "--scheme", "rerope",
                 "--train-len", "64", "--logn", "--lengths", "64,256", "--pattern", "sinks:64,K=4,pos=cache",
                 "--heads", "2", "--head-dim", "16", "--json", str(js)]) == 0
    doc = json.loads(js.read_text())
    assert doc["scheme"] == ["rope:scaling=yarn,factor=4.0,original_len=64", "rerope:w=64"]
    assert {r["length"] for r in doc["results"]} == {64, 256}
    assert main(["resolution", "--scheme", "rope", "--logn"]) == 2
    assert "--train-len" in one_error_line(capsys)


# -- 6. runs: evaluation under another scheme, --init, the instruments on a rope_run ------------------
@pytest.fixture
def rope_run(trained):
    """The session's finished tiny rope rope_run (12 steps at length 32 on the toy corpus; read only)."""
    return trained / "rope"


def test_eval_under_scaling_logn_and_sinks_without_retraining(rope_run, tmp_path, capsys):
    from lexkit.evaluate import evaluate_run

    kw = dict(lengths=[16, 32, 64], patterns=["causal", "sinks:16,K=2,pos=cache"], max_docs=2)
    base = evaluate_run(rope_run, **kw)
    same = evaluate_run(rope_run, scheme="rope:scaling=linear,factor=1", logn=True, **kw)
    assert same["scheme"] == "rope:scaling=linear,factor=1.0,original_len=32" \
        and same["trained_scheme"] == "rope" and same["logn"]
    for a, b in zip(base["results"], same["results"]):
        if a["length"] <= 32:  # factor 1 is RoPE and log-n is 1 inside the training length (32)
            assert a["bpb"] == pytest.approx(b["bpb"], rel=1e-9)
        else:  # past it log-n sharpens: different numbers
            assert a["bpb"] != pytest.approx(b["bpb"], rel=1e-9)
    yarn = evaluate_run(rope_run, scheme="rope:scaling=yarn,factor=4", **kw)
    assert yarn["scheme"] == "rope:scaling=yarn,factor=4.0,original_len=32"
    assert all(r["bpb"] is not None for r in yarn["results"])
    js = tmp_path / "e.json"
    argv = ["eval", str(rope_run), "--lengths", "32,64", "--scheme", "rerope:w=16,k=8", "--logn", "--max-docs", "1",
            "--no-progress", "--pattern", "sinks:16", "--json", str(js)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "scheme rerope:w=16,k=8.0 (trained as rope)  log-n" in out
    assert json.loads(js.read_text())["scheme"] == "rerope:w=16,k=8.0"
    for bad, words in ((["--scheme", "rope:scaling=yarn"], "needs a factor"), (["--scheme", "t5"], "does not fit")):
        assert main(["eval", str(rope_run), "--lengths", "32", "--no-progress", *bad]) == 2
        assert words in one_error_line(capsys)
    assert main(["eval", "hf:some/model", "--lengths", "32", "--logn"]) == 2  # refused before any load
    assert "--logn is for lexkit runs" in one_error_line(capsys)


def test_train_init_continues_a_run_longer_with_a_scaling(rope_run, tmp_path, capsys):
    from lexkit.training import runs
    from lexkit.training.loop import train
    from lexkit.training.runs import configs_from_run

    model_cfg, train_cfg = configs_from_run(rope_run, "rope:scaling=yarn,factor=2", train_len=64, steps=1, lr=1e-12,
                                            warmup=0)
    assert model_cfg.scheme == "rope:scaling=yarn,factor=2.0,original_len=32" and model_cfg.train_len == 64
    assert model_cfg.n_layers == 2 and train_cfg.batch == 8  # the run's own settings
    out = tmp_path / "ft"
    train(out, model_cfg, train_cfg, progress=False, init=rope_run)
    parent, _ = runs.load(rope_run)
    child, config = runs.load(out)
    for (name, a), b in zip(parent.state_dict().items(), child.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-6), name  # started from the parent (one step at lr 1e-12)
    init = config["init"]
    assert init["run"] == str(rope_run) and init["scheme"] == "rope" and init["train_len"] == 32 and init["step"] == 12
    assert init["sha256"] == hashlib.sha256((rope_run / runs.WEIGHTS).read_bytes()).hexdigest()
    # the command: --init with a longer length; the provenance survives --resume
    out2 = tmp_path / "ft2"
    argv = ["train", "--init", str(rope_run), "--scheme", "rope:scaling=linear,factor=2", "--train-len", "64",
            "--steps", "2", "--out", str(out2), "--quiet"]
    assert main(argv) == 0
    assert json.loads((out2 / "config.json").read_text())["init"]["sha256"] == init["sha256"]
    assert main(["train", "--out", str(out2), "--resume", "--steps", "3", "--quiet"]) == 0
    cfg2 = json.loads((out2 / "config.json").read_text())
    assert cfg2["init"]["run"] == str(rope_run)
    assert cfg2["model"]["scheme"] == "rope:scaling=linear,factor=2.0,original_len=32"
    capsys.readouterr()
    for bad, words in ((["--init", str(rope_run), "--resume"], "give one of them"),
                       (["--init", str(tmp_path / "nope")], "does not exist"),
                       (["--init", str(rope_run), "--scheme", "t5"], "does not match")):
        assert main(["train", "--out", str(tmp_path / "x"), "--quiet", *bad]) == 2
        assert words in one_error_line(capsys)


def test_instruments_on_a_run_under_extension(rope_run):
    """Entropy by length and the design-principle check run on every method; log-n lowers the
    first layer's entropy past the training length (softmax entropy falls as logits are scaled up:
    d H(βz)/dβ = -β Var(z) <= 0), and changes nothing inside it."""
    from lexkit.instruments.principles import measure_principles
    from lexkit.training.runs import load

    plain = resolution.empirical_run(rope_run, [32, 128], "causal", texts_per_length=2)
    logn = resolution.empirical_run(rope_run, [32, 128], "causal", texts_per_length=2, logn=True)
    assert logn["logn"] and not plain["logn"]
    e_in = (plain["results"][0]["entropy_per_layer"][0], logn["results"][0]["entropy_per_layer"][0])
    e_out = (plain["results"][1]["entropy_per_layer"][0], logn["results"][1]["entropy_per_layer"][0])
    assert e_in[0] == pytest.approx(e_in[1], rel=1e-9) and e_out[1] < e_out[0]
    for spec in ("rope:scaling=yarn,factor=4", "rope:scaling=dynamic,factor=4", "rerope:w=16,k=8"):
        doc = resolution.empirical_run(rope_run, [64], "sinks:16,K=2,pos=cache", texts_per_length=1, scheme=spec)
        model, _ = load(rope_run, scheme=spec)
        assert 0 < doc["results"][0]["resolution"] <= 1 and doc["trained_scheme"] == "rope"
        assert doc["scheme"] == doc["label"] == model.scheme.spec  # the resolved spec that ran, as eval's
        assert doc["scheme"].startswith(positions.canonical(spec))
        p = measure_principles(model, [bytes(range(32, 127)) * 4])
        assert p["order_variance"] > 0 and math.isfinite(p["translation"])
        if spec.startswith("rope:scaling=yarn") or spec.startswith("rerope"):  # relative: translation invariant
            assert p["translation"] < 1e-4


