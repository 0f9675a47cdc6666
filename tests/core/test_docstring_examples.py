"""The examples in the public docstrings run and give what they show (``doctest``)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import eventtime

MODULES = sorted(
    name for _, name, _ in pkgutil.walk_packages(eventtime.__path__, "eventtime.")
    if not name.endswith("__main__")
)


def test_every_folder_is_walked():
    for package in ("core", "harness", "spark", "sinks", "ops", "query", "cli"):
        assert any(name.startswith(f"eventtime.{package}.") for name in MODULES), package


@pytest.mark.parametrize("name", ["eventtime", *MODULES])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} example(s) failed (output above)"
