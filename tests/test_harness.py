"""The suite's own harness (tests/conftest.py) in the runs it must serve besides ``make test``."""

from __future__ import annotations

import pytest
from _pytest.config import get_config

import conftest


def test_the_conftest_registers_without_pytest_xdist():
    """``pytest -p no:xdist`` (or pytest-xdist not installed): the conftest's hook of pytest-xdist's
    (``pytest_xdist_make_scheduler``) is optional, so pytest's check of unknown hooks passes; without
    ``optionalhook`` it failed every such run with an internal error before any test ran."""
    manager = get_config().pluginmanager  # pytest's own plugins only: no pytest-xdist hooks declared
    assert manager.hook.__dict__.get("pytest_xdist_make_scheduler") is None
    manager.register(conftest, "the suite's conftest")
    manager.check_pending()  # PluginValidationError for an unknown hook that is not optional


def test_the_scheduler_hands_out_a_file_or_a_group(request, monkeypatch):
    """``--dist loadgroup``: a test file's tests are one unit, a named group one unit; any other mode is
    pytest-xdist's own."""
    if not hasattr(request.config.option, "tx"):
        pytest.skip("pytest-xdist is not loaded in this run")
    monkeypatch.setattr(request.config.option, "dist", "loadgroup")
    monkeypatch.setattr(request.config.option, "tx", ["2*popen"])  # the controller's, as ``-n 2`` sets it
    scheduler = conftest.pytest_xdist_make_scheduler(request.config, log=None)
    assert scheduler._split_scope("tests/test_a.py::test_b[rope@window:16]") == "tests/test_a.py"
    assert scheduler._split_scope("tests/test_a.py::test_c[1]") == "tests/test_a.py"
    assert scheduler._split_scope("tests/test_hf.py::test_d[x]@hf") == "hf"
    monkeypatch.setattr(request.config.option, "dist", "load")
    assert conftest.pytest_xdist_make_scheduler(request.config, log=None) is None
