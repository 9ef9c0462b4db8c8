"""A causal LM sweep read like a classifier sweep: roles from the LM scores (`sweep.lm_roles`),
seed matching on the pattern scores, and the washout column (C13's continuous statistic)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from headlab.analysis.lm_heads import LM_PATTERN_SCORES, LM_ROLE_NAMES, lm_role_ids, lm_roles
from headlab.analysis.roles import ROLES
from headlab.store import HEAD_METRICS, append_part, head_metric_rows
from headlab.sweep.heads import head_summary, seed_matches, washout
from headlab.sweep.lm_roles import with_lm_roles
from headlab.sweep.runs import Run

PREV, IND, DUP, MIXED = (ROLES.index(r) for r in ("previous_token", "induction", "duplicate", "mixed"))


def test_role_ids_name_what_the_lm_role_rule_names():
    scores = torch.rand(500, 3)
    named = lm_roles({name: scores[:, i] for i, name in enumerate(LM_PATTERN_SCORES)})
    assert [ROLES[int(i)] for i in lm_role_ids(scores)] == [LM_ROLE_NAMES[n] for n in named]
    # hand-made: 0.4 is the threshold (inclusive), the largest share wins, NaN stays NaN
    ids = lm_role_ids(torch.tensor([[0.4, 0.1, 0.0], [0.39, 0.2, 0.1], [0.1, 0.5, 0.6], [0.2, 0.9, 0.1],
                                    [float("nan"), 0.9, 0.0]]))
    assert ids[:4].tolist() == [PREV, MIXED, IND, DUP] and ids[4].isnan()


def _lm_run(folder: Path, job: str, by_step: dict[int, list[list[float]]]) -> Run:
    """A one-layer LM run: per step, each head's (previous, duplicate, induction) scores."""
    folder.mkdir(parents=True)
    for step, heads in by_step.items():
        scores = np.asarray(heads, float)
        layer = {name: scores[:, i] for i, name in enumerate(LM_PATTERN_SCORES)}
        append_part(folder / HEAD_METRICS, step, head_metric_rows(job, step, 0, [layer]))
    frame = pd.concat(pd.read_parquet(p) for p in sorted((folder / HEAD_METRICS).glob("*.parquet")))
    return Run(job, folder, "completed", head_metrics=with_lm_roles(frame))


def test_an_lm_run_gets_role_rows_settle_steps_and_final_roles(tmp_path):
    run = _lm_run(tmp_path / "0", "0", {0: [[0.1, 0.1, 0.1], [0.1, 0.1, 0.1]],
                                        100: [[0.7, 0.0, 0.0], [0.1, 0.1, 0.1]],
                                        200: [[0.8, 0.0, 0.0], [0.1, 0.2, 0.5]],
                                        300: [[0.8, 0.0, 0.0], [0.1, 0.2, 0.6]]})
    roles = run.head_metrics[run.head_metrics["metric"] == "role"].sort_values(["step", "head"])
    assert roles["value"].tolist() == [MIXED, MIXED, PREV, MIXED, PREV, IND, PREV, IND]
    heads = head_summary(run, None).set_index("head")
    assert heads["final_role"].tolist() == ["previous_token", "induction"]
    assert heads["initial_role"].tolist() == ["mixed", "mixed"]
    assert heads["role_bifurcation_step"].tolist() == [100.0, 200.0]
    assert heads["washout"].isna().tolist() == [False, False] and np.allclose(heads["washout"], [0.0, 0.0])  # still at peak


def test_a_run_with_its_own_roles_is_left_as_it_is():
    table = pd.DataFrame({"step": [0, 0], "layer": [0, 0], "head": [0, 0], "metric": ["role", "prev_token_score"],
                          "value": [3.0, 0.9]})
    assert with_lm_roles(table) is table


def test_washout_by_hand():
    # [t, head, score]; head 0 peaks at 0.9 on score 1 and ends at 0.5; head 1 rises to its last value;
    # head 2 never reaches 0.4; head 3 peaks on score 0 (0.6 > score 2's 0.5) and ends at 0.45 there
    shares = np.array([[[0.1, 0.2, 0.0], [0.1, 0.1, 0.1], [0.1, 0.1, 0.1], [0.2, 0.0, 0.1]],
                       [[0.2, 0.9, 0.1], [0.2, 0.3, 0.1], [0.3, 0.2, 0.1], [0.6, 0.0, 0.5]],
                       [[0.1, 0.5, 0.1], [0.2, 0.5, 0.2], [0.2, 0.39, 0.0], [0.45, 0.1, 0.2]]])
    out = washout(shares)
    assert np.allclose(out[[0, 1, 3]], [0.4, 0.0, 0.15]) and np.isnan(out[2])


def test_lm_seeds_are_matched_on_the_pattern_scores(tmp_path):
    a = _lm_run(tmp_path / "a", "a", {0: [[0.1] * 3, [0.1] * 3], 300: [[0.8, 0.0, 0.0], [0.0, 0.2, 0.7]]})
    b = _lm_run(tmp_path / "b", "b", {0: [[0.1] * 3, [0.1] * 3], 300: [[0.0, 0.3, 0.6], [0.9, 0.0, 0.1]]})
    matches = seed_matches([a, b])
    assert matches["error"].tolist() == [""] and matches["same_role"].tolist() == [1.0]  # swapped heads found


# ---- the article's three pattern types (C2) -----------------------------------------------------

def test_pattern_types_by_hand_at_the_bars():
    from headlab.sweep.lm_roles import lm_pattern_types

    nan = float("nan")
    scores = np.array([[0.4, 0.1, 0.0],    # previous-token at the bar (inclusive)
                       [0.5, 0.0, 0.1],    # previous-token, spread enough to pass the entropy bar: the pattern wins
                       [0.1, 0.2, 0.6],    # induction
                       [0.1, 0.5, 0.3],    # duplicate
                       [0.39, 0.2, 0.1],   # no pattern, entropy at the bar
                       [0.1, 0.1, 0.1],    # no pattern, entropy just below it (a sink-like head)
                       [0.1, 0.1, 0.1],    # entropy unmeasured
                       [nan, 0.9, 0.0]])   # a score unmeasured
    entropy = np.array([0.3, 0.95, 0.5, 0.5, 0.85, 0.8499, nan, 0.9])
    assert lm_pattern_types(scores, entropy) == ["local_diagonal", "local_diagonal", "distant_points", "distant_points",
                                                 "uniform", "untyped", "untyped", "untyped"]


def test_pattern_types_refuse_mismatched_shapes():
    import pytest

    from headlab.errors import DataError
    from headlab.sweep.lm_roles import lm_pattern_types

    with pytest.raises(DataError):
        lm_pattern_types(np.zeros((3, 3)), np.zeros(2))


def test_final_type_is_read_at_the_last_measurement_and_missing_without_the_entropy(tmp_path):
    from headlab.analysis.lm_heads import CAUSAL_ENTROPY

    folder = tmp_path / "0"
    folder.mkdir()
    # step 0: all near-uniform; step 300: head 0 previous-token, head 1 induction, head 2 still uniform, head 3 a sink
    by_step = {0: ([[0.1] * 3] * 4, [0.99] * 4),
               300: ([[0.9, 0.0, 0.0], [0.0, 0.2, 0.7], [0.1, 0.1, 0.1], [0.2, 0.1, 0.1]], [0.2, 0.4, 0.97, 0.1])}
    for step, (heads, entropy) in by_step.items():
        scores = np.asarray(heads, float)
        layer = {name: scores[:, i] for i, name in enumerate(LM_PATTERN_SCORES)} | {CAUSAL_ENTROPY: np.asarray(entropy)}
        append_part(folder / HEAD_METRICS, step, head_metric_rows("0", step, 0, [layer]))
    frame = pd.concat(pd.read_parquet(p) for p in sorted((folder / HEAD_METRICS).glob("*.parquet")))
    heads = head_summary(Run("0", folder, "completed", head_metrics=with_lm_roles(frame)), None).set_index("head")
    assert heads["final_type"].tolist() == ["local_diagonal", "distant_points", "uniform", "untyped"]
    old = _lm_run(tmp_path / "old", "old", {0: [[0.9, 0.0, 0.0]], 300: [[0.9, 0.0, 0.0]]})  # measured before the entropy
    assert head_summary(old, None)["final_type"].isna().all()
