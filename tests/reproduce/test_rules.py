"""The rule language: what parses, what is refused, and three-valued evaluation."""

from __future__ import annotations

import math

import pytest

from headlab.errors import ConfigError
from headlab.reproduce.rules import evaluate, parse_rule

NAN = math.nan


@pytest.mark.parametrize("text, values, expected", [
    ("gap.ci_low > 0 and gap.ci_low <= 0.02 <= gap.ci_high", {"gap.ci_low": 0.01, "gap.ci_high": 0.03}, True),
    ("gap.ci_low > 0 and gap.ci_low <= 0.02 <= gap.ci_high", {"gap.ci_low": 0.01, "gap.ci_high": 0.015}, False),
    ("gap.ci_high < 0.005", {"gap.ci_high": 0.004}, True),
    ("abs(gap.mean) < 0.01 or gap.n >= 5", {"gap.mean": -0.02, "gap.n": 5}, True),
    ("not gap.mean > 0", {"gap.mean": -1.0}, True),
    ("-gap.mean > 0.5", {"gap.mean": -1.0}, True),
    ("(a.mean > 0 or b.mean > 0) and a.n >= 3", {"a.mean": -1, "b.mean": 1, "a.n": 3}, True),
])
def test_rules_evaluate_like_the_arithmetic_they_spell(text, values, expected):
    assert evaluate(parse_rule(text), values) is expected


def test_a_nan_or_missing_value_leaves_the_rule_undecided_unless_and_or_decide_without_it():
    assert evaluate(parse_rule("gap.ci_low > 0"), {"gap.ci_low": NAN}) is None
    assert evaluate(parse_rule("gap.ci_low > 0"), {}) is None
    assert evaluate(parse_rule("gap.mean > 0 and gap.ci_low > 0"), {"gap.mean": -1, "gap.ci_low": NAN}) is False
    assert evaluate(parse_rule("gap.mean > 0 or gap.ci_low > 0"), {"gap.mean": 1, "gap.ci_low": NAN}) is True
    assert evaluate(parse_rule("gap.mean > 0 or gap.ci_low > 0"), {"gap.mean": -1, "gap.ci_low": NAN}) is None


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')",   # a call other than abs
    "gap.mean.__class__",                # attribute chains
    "gap.std > 0",                       # a field that is not a statistic field
    "gap.mean == 0",                     # == is not offered (floats)
    "gap.mean + 1 > 0",                  # arithmetic is not offered
    "'a' < 'b'",                         # strings
    "[gap.mean][0] > 0",
    "lambda: 1",
    "gap.mean >",                        # does not parse
    "",
])
def test_anything_outside_the_grammar_is_a_config_error_naming_the_key(text):
    with pytest.raises(ConfigError, match=r"^invalid config c99\.yaml: rule"):
        parse_rule(text, key="c99.yaml: rule")


def test_a_rule_naming_an_undefined_statistic_is_refused():
    with pytest.raises(ConfigError, match="unknown: other"):
        parse_rule("gap.ci_low > 0 and other.mean > 0", statistics=("gap",))
