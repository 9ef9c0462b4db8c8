"""Verdict rules written before running: a tiny, safe expression language over named statistics.

A rule is text such as ``"gap.ci_low > 0 and gap.ci_low <= 0.02 <= gap.ci_high"``. Allowed:
numbers, names ``<statistic>.<field>`` (fields: ``mean``, ``ci_low``, ``ci_high``, ``n``),
comparisons (``< <= > >=``, chained), ``and``, ``or``, ``not``, parentheses, unary minus and
``abs(...)``. Nothing else parses: the text goes through Python's parser and every node is checked
against this list, then a small interpreter walks the tree (nothing is ever passed to ``eval``).

A comparison that reads a missing or NaN value is *undecided* (None), and so is the whole rule
unless ``and`` / ``or`` decide it without that part (``False and ?`` is False, ``True or ?`` True).
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass
from typing import Mapping

from headlab.errors import ConfigError

FIELDS = ("mean", "ci_low", "ci_high", "n")
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}


@dataclass(frozen=True)
class Rule:
    """A parsed, checked rule: `names` are the `stat.field` variables it reads."""

    text: str
    tree: ast.Expression
    names: frozenset[str]


def parse_rule(text: str, key: str = "rule", statistics: tuple[str, ...] | None = None) -> Rule:
    """Parse and check `text`; ConfigError (naming `key`) for anything outside the grammar, or a
    statistic not in `statistics` when given.

    >>> sorted(parse_rule("gap.ci_low > 0 and abs(gap.mean) < 0.1").names)
    ['gap.ci_low', 'gap.mean']
    """
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(key, text, "a non-empty rule such as 'gap.ci_low > 0'")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        raise ConfigError(key, text, f"a rule that parses ({err.msg})") from err
    names: set[str] = set()
    _check(tree.body, key, text, names)
    if statistics is not None:
        unknown = sorted({n.split(".")[0] for n in names} - set(statistics))
        if unknown:
            raise ConfigError(key, text, f"statistics defined in the spec ({', '.join(statistics)}); unknown: {', '.join(unknown)}")
    return Rule(text, tree, frozenset(names))


def evaluate(rule: Rule, values: Mapping[str, float]) -> bool | None:
    """True / False, or None when the rule depends on a missing or NaN value.

    >>> r = parse_rule("gap.ci_low > 0 and gap.ci_low <= 0.02 <= gap.ci_high")
    >>> evaluate(r, {"gap.ci_low": 0.01, "gap.ci_high": 0.03})
    True
    >>> evaluate(r, {"gap.ci_low": float("nan"), "gap.ci_high": 0.03}) is None
    True
    """
    return _eval(rule.tree.body, values)


def _check(node: ast.AST, key: str, text: str, names: set[str]) -> None:
    if isinstance(node, ast.BoolOp) and isinstance(node.op, (ast.And, ast.Or)):
        for value in node.values:
            _check(value, key, text, names)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        _check(node.operand, key, text, names)
    elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        for operand in (node.left, *node.comparators):
            _check(operand, key, text, names)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "abs" \
            and len(node.args) == 1 and not node.keywords:
        _check(node.args[0], key, text, names)
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        pass
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in FIELDS:
        names.add(f"{node.value.id}.{node.attr}")
    else:
        shown = ast.get_source_segment(text.strip(), node) or type(node).__name__
        raise ConfigError(key, text, f"numbers, <statistic>.{{{','.join(FIELDS)}}}, < <= > >=, and/or/not, abs(), "
                                     f"unary minus; not {shown!r}")


def _eval(node: ast.AST, values: Mapping[str, float]):
    if isinstance(node, ast.BoolOp):
        return _bool_op(node, values)
    if isinstance(node, ast.UnaryOp):
        inner = _eval(node.operand, values)
        if inner is None:
            return None
        return (not inner) if isinstance(node.op, ast.Not) else -inner
    if isinstance(node, ast.Compare):
        return _compare(node, values)
    if isinstance(node, ast.Call):
        inner = _eval(node.args[0], values)
        return None if inner is None else abs(inner)
    if isinstance(node, ast.Constant):
        return float(node.value)
    value = values.get(f"{node.value.id}.{node.attr}")  # an Attribute: _check allowed nothing else
    return None if value is None or not math.isfinite(float(value)) else float(value)


def _bool_op(node: ast.BoolOp, values: Mapping[str, float]) -> bool | None:
    results = [_eval(v, values) for v in node.values]
    decisive = isinstance(node.op, ast.Or)  # the value that decides: True for or, False for and
    if any(r is decisive for r in results):
        return decisive
    return None if any(r is None for r in results) else not decisive


def _compare(node: ast.Compare, values: Mapping[str, float]) -> bool | None:
    operands = [_eval(o, values) for o in (node.left, *node.comparators)]
    if any(o is None for o in operands):
        return None
    return all(_COMPARE[type(op)](a, b) for op, a, b in zip(node.ops, operands, operands[1:]))
