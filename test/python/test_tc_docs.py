"""Every docstring example of the public trellisc API runs and prints what
it says."""
import doctest
import importlib
import pkgutil

import numpy as np
import pytest

import _tc_env  # noqa: F401
import trellisc as tc

MODULES = [
    "trellisc._trace",
    "trellisc.dtypes",
    "trellisc.input_info",
    "trellisc.module",
    "trellisc.compile",
    "trellisc.trellis",
] + [f"trellisc.ops.{m.name}" for m in pkgutil.iter_modules(tc.ops.__path__)]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, globs={"tc": tc, "np": np}) if t.examples]
    assert tests, f"{name} has no docstring examples"
    for t in tests:
        runner.run(t)
    assert runner.failures == 0, f"{runner.failures} failing examples in {name}"


def test_every_public_function_has_an_example():
    missing = []
    for name in tc.__all__:
        obj = getattr(tc, name)
        if (
            callable(obj)
            and not isinstance(obj, type(tc))
            and name not in ("TrellisError", "dtype", "read_safetensors", "Executable")
        ):
            if ">>>" not in (obj.__doc__ or ""):
                missing.append(name)
    assert not missing, f"public functions without an example: {missing}"
