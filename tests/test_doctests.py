"""The examples in the library's and the workbench's docstrings run, and say what they show.

A newcomer learns the tree, the palette and the report from these examples; one that drifted
from the code would teach the wrong thing. Examples that need a model are written as plain
code blocks (``::``), not ``>>>``, so they are not collected here.
"""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import oilbird
import workbench

MODULES = sorted(m.name for pkg in (oilbird, workbench)
                 for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")
                 if not m.name.endswith("__main__"))


def test_the_examples_are_collected():
    """The collection itself is checked: the tree's and the palette's examples are found (a
    finder that found nothing would pass every module below)."""
    def examples(name):
        return sum(len(t.examples) for t in doctest.DocTestFinder().find(importlib.import_module(name)))
    assert {"oilbird.tree", "workbench.palette"} <= set(MODULES)
    assert examples("oilbird.tree") >= 1 and examples("workbench.palette") >= 3


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (printed above)"
