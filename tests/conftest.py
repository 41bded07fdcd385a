import functools
import os
import sys

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # tests never reach a hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LEXKIT_THREADS", "1")  # commands run by tests take THREADS (lexkit.core.threads' policy)

import pytest


def _memory_temproot() -> str | None:
    """``/dev/shm`` where it is a writable tmpfs that may run what is written there (no ``noexec``: a test
    runs a virtualenv's interpreter) with 1 GiB free, else None. lexkit writes every file through a
    temporary file, ``fsync`` and a rename (training.runs.files.atomic_write): on a disk that is 5-8 ms
    of waiting a file on a loaded machine, a quarter of the suite's time; in memory none."""
    try:
        with open("/proc/mounts") as mounts:
            entries = [line.split() for line in mounts if line.split()[1:2] == ["/dev/shm"]]
        if not entries or entries[-1][2] != "tmpfs" or {"ro", "noexec"} & set(entries[-1][3].split(",")):
            return None
        free = os.statvfs("/dev/shm")
        if not os.access("/dev/shm", os.W_OK | os.X_OK) or free.f_bavail * free.f_frsize < 1 << 30:
            return None
    except (OSError, IndexError):
        return None
    return "/dev/shm"


# tmp_path and its kin in memory where it can be (pytest keeps the last three sessions' as on disk);
# PYTEST_DEBUG_TEMPROOT set outside wins
if _memory_temproot() is not None:
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", "/dev/shm")


#: one torch thread for every test: the tensors here are small, and on a shared 2-core machine
#: (other processes, Inductor's compile workers) two spinning threads per op made the suite several
#: times slower; ``--threads 1`` in a test changed the whole rest of the session before
THREADS = 1
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures"))


def pytest_configure(config):
    """``THREADS`` in every process that runs tests. torch is imported here and in the fixtures,
    not at the top: the controller of ``pytest -n``, which runs no test, never imports it while
    its workers collect."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    import gc

    import torch

    torch.set_num_threads(THREADS)
    # the cyclic collector every 50,000 allocations instead of 700: the tests make many short-lived objects
    # (autograd graphs, rows, figures) and few cycles; measured per worker: 2,850 young collections and 20 full
    # ones, 1.5-1.6 s of a 40-s run, became 325 and 4, 0.7 s
    gc.set_threshold(50_000, 20, 100)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: a run without it (``-p no:xdist``) must not fail
def pytest_xdist_make_scheduler(config, log):
    """``pytest -n --dist loadgroup`` hands out a test file's tests as one unit (a named ``xdist_group``
    stays one unit, as pytest-xdist's loadgroup makes it), where pytest-xdist sends each ungrouped test
    alone. Per test, the controller sent 1,800 commands and rescanned each worker's every past unit after
    each test (quadratic), and both workers built each file's module fixtures; per file neither happens.
    Units go out largest first (pytest-xdist's ``--loadscope-reorder``), so what is left at the end is the
    files of one or two short tests. Measured on fresh clones here, alternating with the per-test order:
    40.8 against 42.0 s of test time (means of four pairs; CPU 78.9 against 81.2 s), and in a slower hour
    44.8 against 49.1 s (six pairs, the files made groups by marks); faster in 8 pairs of 10."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ByFile(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)  # the group's name, or the test's own id
            return nodeid.split("::", 1)[0] if scope == nodeid else scope

    return ByFile(config, log)


@functools.cache
def _accelerated() -> bool:
    """Whether torch sees CUDA, an XPU or MPS here (torch.manual_seed seeds them too)."""
    import torch

    return torch.cuda.is_available() or torch.xpu.is_available() or torch.backends.mps.is_available()


@pytest.fixture(autouse=True)
def _seed():
    """Seed 0 for every test; the thread count put back for the next one (``--threads N`` sets it). Without
    an accelerator, the CPU's generator alone: the state torch.manual_seed gives it, without the seed that
    call queues for each accelerator not started, a formatted stack each (0.5-1 ms a test, most of a small
    test's time)."""
    import torch

    if _accelerated():
        torch.manual_seed(0)
    else:
        torch.default_generator.manual_seed(0)
    yield
    if torch.get_num_threads() != THREADS:
        torch.set_num_threads(THREADS)


@pytest.fixture(autouse=True)
def _device(request, monkeypatch):
    """Tests about CPU behaviour run on the CPU even on a GPU machine (``auto`` means cpu); tests
    marked ``gpu`` need CUDA and are skipped without it (``make test-gpu`` runs them)."""
    import torch

    if request.node.get_closest_marker("gpu") is not None:
        if not torch.cuda.is_available():
            pytest.skip("needs CUDA")
        monkeypatch.setenv("LEXKIT_DEVICE", "cuda")
    else:
        monkeypatch.setenv("LEXKIT_DEVICE", "cpu")


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """Finished tiny runs trained once for the whole session by ``lexkit train`` (flags ``TINY``) on
    the toy corpus in ``data``: ``alibi`` and ``rope``. Read them only; copy one to change it
    (the ``run`` fixture)."""
    import torch

    from lexkit.cli import main
    from toy_corpus import TINY, write_corpus

    root = tmp_path_factory.mktemp("trained")
    data = write_corpus(root / "data")
    for scheme in ("alibi", "rope"):
        assert main(["train", "--scheme", scheme, "--out", str(root / scheme), "--data", str(data), *TINY]) == 0
    torch.set_num_threads(THREADS)
    return root


@pytest.fixture
def run(trained, tmp_path):
    """A private copy of the finished alibi run (tests may damage it)."""
    out = tmp_path / "run"
    out.mkdir()
    for f in (trained / "alibi").iterdir():
        (out / f.name).write_bytes(f.read_bytes())
    return out


@pytest.fixture
def eager_flex(monkeypatch):
    """Flex through unfused eager FlexAttention instead of the compiled one: the same score_mod,
    block mask, query blocks and ladder in lexkit, no Inductor (a compile costs seconds per shape
    and closure on the CPU), and a backward on the CPU (torch refuses it there only in an input
    check, ``_validate_device``, written for the compiled kernels). Decisions of the ladder made
    meanwhile are dropped afterwards. Compiled flex is refused on the CPU (kernels.choice.CPU_FLEX_REFUSAL,
    lifted here) and tested on CUDA (test_gpu.py). torch's
    eager flex (traced by dynamo with the eager backend) is the one whose backward reaches captured
    tensors: with ``_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG`` KERPLE's and T5's parameters get no gradient."""
    import warnings

    import torch._dynamo.config
    from torch.nn.attention import flex_attention as fa

    from lexkit.attention import kernels

    monkeypatch.setattr(fa, "_validate_device", lambda *tensors: None)
    monkeypatch.setattr(kernels.flex, "compiled_flex", lambda: fa.flex_attention)
    monkeypatch.setattr(kernels.choice, "CPU_FLEX_REFUSAL", None)  # eager flex is right on the CPU: a reference
    monkeypatch.setattr(kernels.flex, "FLEX_DECISIONS", {})
    # each shape traced as it is: after one test changed a shape, dynamo traced every later eager flex call with
    # symbolic shapes, about a quarter slower (torch lifts the recompile limit for eager flex already)
    monkeypatch.setattr(torch._dynamo.config, "automatic_dynamic_shapes", False)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile")
        yield fa.flex_attention


@pytest.fixture
def no_figures(monkeypatch):
    """Study reports written without their figures (matplotlib's layout and PNG encoding is about
    half a second a figure): for tests about a study's cache, lock or ranks, not about its report.
    The figures themselves are rendered in test_report (each kind laid out and drawn, table G's
    written as PNG) and by the commands' tests (sweep, resolution, inspect)."""
    from lexkit.study.report import sections

    monkeypatch.setattr(sections, "report_figures", lambda results, out=None: {})


@pytest.fixture
def unrendered(monkeypatch):
    """Every figure built from its numbers by its own drawing function and its file written where it
    would be (a path, or a stream), as a placeholder: neither laid out nor rendered by matplotlib (its
    constrained layout and PNG encoding, about 0.2-0.5 s a figure, most of drawing one). For tests
    about which figures a command writes, and under which names; their rendering is test_report's
    and each command's own test's."""
    from pathlib import Path

    from matplotlib.figure import Figure

    def save(fig, fname, **options):
        if hasattr(fname, "write"):
            fname.write(b"unrendered")
        else:
            Path(fname).write_bytes(b"unrendered")

    monkeypatch.setattr(Figure, "savefig", save)


def pytest_unconfigure(config):
    """The session is over: freeze what is left, so that the interpreter's collections at exit do
    not walk every object torch, dynamo and transformers made (about 2 s per process on 2 cores,
    paid before ``pytest -n`` can report). Nothing in the suite relies on a finalizer at exit."""
    import gc

    gc.freeze()


#: the number of modules loaded when the collector's long-lived objects were last frozen
_FROZEN_AT = [0]


def pytest_runtest_logfinish(nodeid, location):
    """After a test that imported libraries (transformers, dynamo, matplotlib: hundreds of thousands
    of objects that live as long as the process), move what is alive into the collector's permanent
    generation, so that each later full collection walks what the tests make, not the libraries
    (measured: 1.75 s of full collections per worker, 11 of about 160 ms, became 0.5 s)."""
    import gc

    if len(sys.modules) - _FROZEN_AT[0] >= 25:
        gc.freeze()
        _FROZEN_AT[0] = len(sys.modules)
