"""Run the exact examples in the analysis docstrings, so CI covers them without --doctest-modules."""

import doctest
import importlib

import pytest

MODULES = [
    "headlab.analysis.attention_metrics",
    "headlab.analysis.head_similarity",
    "headlab.analysis.mean_pattern",
    "headlab.analysis.weight_similarity",
    "headlab.analysis.roles",
    "headlab.analysis.probe_layer",
    "headlab.plots.sweep",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module)
    assert result.attempted > 0, f"{name} has no doctest examples"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
