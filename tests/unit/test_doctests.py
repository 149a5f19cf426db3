"""The examples in the package's docstrings run and print what they say."""

import doctest
import importlib
import pkgutil

import pytest

import vidnexus

MODULES = sorted(m.name for m in pkgutil.walk_packages(vidnexus.__path__, "vidnexus.")
                 if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
