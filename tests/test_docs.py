"""The examples in the docstrings run and print what they say."""

import doctest
import importlib
import pkgutil

import pytest

import search_spaces
import simulator
import vtatune


def _modules():
    for package in (simulator, search_spaces, vtatune):
        yield package.__name__
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith("__main__"):  # importing it runs the CLI
                yield info.name


@pytest.mark.parametrize("name", sorted(set(_modules())))
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
