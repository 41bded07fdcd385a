"""Before/after: a tiny study with every table, and ``lexkit eval``, ``resolution`` and ``retrieval`` on
its runs, write the same files, number for number, as when tests/fixtures/safety_net/ was made
(tests/fixtures/safety_net.py says what is run, what is masked and how to regenerate it on purpose)."""

import difflib

import pytest

import safety_net

pytestmark = pytest.mark.xdist_group("safety_net")  # one worker makes the files once for every comparison


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
