"""Before/after: a tiny study with every table, ``lexkit eval``, ``resolution``, ``sample``, ``retrieval`` and
``inspect`` on its runs, the listings and a tiny ``lexkit sweep`` write the same files, number for number, as when
tests/fixtures/safety_net/ was made (tests/fixtures/safety_net.py says what is run, what is masked and how to
regenerate it on purpose)."""

import difflib

import pytest

import safety_net

# one worker makes the files once for every comparison; slow (~15 s of study on one core: a tiny study
# with table G's methods on two seeds): run it with `make test-slow` before a change lands that should
# keep the numbers. Fast sibling, the same code path: tests/test_study.py::test_tiny_study_end_to_end
# (every table of a tiny study, its report and results.json) and tests/test_workers.py's study in
# workers number for number against one process
pytestmark = [pytest.mark.xdist_group("safety_net"), pytest.mark.slow]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    return safety_net.produce(tmp_path_factory.mktemp("safety_net"))


@pytest.mark.parametrize("name", sorted(p.name for p in safety_net.HERE.iterdir()))
def test_the_same_files_as_before(written, name):
    expected = (safety_net.HERE / name).read_text()
    assert name in written, f"{name} was not written"
    if written[name] != expected:
        diff = difflib.unified_diff(expected.splitlines(), written[name].splitlines(), "before", "now", lineterm="",
                                    n=1)
        pytest.fail(f"{name} differs from the fixture:\n" + "\n".join(list(diff)[:40]))


def test_nothing_new_is_written_unchecked(written):
    assert sorted(written) == sorted(p.name for p in safety_net.HERE.iterdir())
