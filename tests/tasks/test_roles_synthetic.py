"""The measured roles recover what the synthetic task plants (slow: about a minute of CPU).

The previous-token role is planted for the marker queries (`y` reads the letter before it), so it
is read from the conditional role `role@y` (`callbacks.head_metrics.query_tokens=[y]`); the
long-range role (last letter vs first) from the all-query role.
"""

from __future__ import annotations

import pytest

from headlab.analysis import ROLES
from headlab.tasks.train import train
from headlab.store import read_table

# Long enough for the three planted features to be learned (12 epochs of 200 batches of 32 = 2,400 steps; val acc 1.0).
# RoPE: a head finds "the token before me" from relative positions in a few hundred steps;
# with sinusoidal absolute positions the same model takes several times longer.
LEARNS = [
    "data=synthetic",
    "data.synthetic.n=8000",
    "data.probe_size=256",
    "model.d_model=64",
    "model.n_heads=4",
    "model.n_layers=2",
    "model.dropout=0.0",
    "model.pos_encoding=rope",
    "model.pooling=mean",
    "optim.lr=2e-3",
    "optim.warmup_steps=100",
    "optim.schedule=constant",
    "trainer.max_epochs=12",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "callbacks.progress_bar=null",
    "callbacks.head_metrics.figures=false",
    "callbacks.head_metrics.log_to_loggers=false",
    "callbacks.head_metrics.query_tokens=[y]",
    "test=false",
]


@pytest.fixture(scope="module")
def learned_roles(tmp_path_factory, compose_tiny):
    """Roles at step 0 and at the end of a run that learned the task (trained once per module)."""
    run = tmp_path_factory.mktemp("roles") / "run"
    summary = train(compose_tiny(run, "trainer.limit_train_batches=1.0", *LEARNS))
    table = read_table(run / "head_metrics.parquet")
    first, last = {}, {}
    for metric in ("role", "role@y"):
        roles = table[table.metric == metric]
        first[metric] = {ROLES[int(v)] for v in roles[roles.step == 0].value}
        last[metric] = {ROLES[int(v)] for v in roles[roles.step == roles.step.max()].value}
    return summary, first, last


@pytest.mark.slow
def test_long_range_role_is_learned_not_given(learned_roles):
    summary, first, last = learned_roles
    assert summary["val_acc"] > 0.9, "the task was not learned; roles would mean nothing"
    assert "long_range" in last["role"], last
    assert "long_range" not in first["role"], first


@pytest.mark.slow
def test_previous_token_role_is_learned_for_the_marker_queries(learned_roles):
    summary, first, last = learned_roles
    assert summary["val_acc"] > 0.9, "the task was not learned; roles would mean nothing"
    assert "previous_token" in last["role@y"], last
    assert "previous_token" not in first["role@y"], first
