"""The measured roles recover what the synthetic task plants (slow: about a minute of CPU)."""

from __future__ import annotations

import pytest

from headlab.analysis import ROLES
from headlab.cli.train import train
from headlab.store import read_table

# Long enough for the three planted features to be learned (val acc > 0.9 at ~1,000 steps).
LEARNS = [
    "data=synthetic",
    "data.synthetic.n=8000",
    "data.probe_size=256",
    "model.d_model=64",
    "model.n_heads=4",
    "model.n_layers=2",
    "model.dropout=0.0",
    "optim.lr=2e-3",
    "optim.warmup_steps=100",
    "optim.schedule=constant",
    "trainer.max_epochs=12",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "callbacks.progress_bar=null",
    "callbacks.head_metrics.figures=false",
    "callbacks.head_metrics.log_to_loggers=false",
    "test=false",
]


@pytest.fixture(scope="module")
def learned_roles(tmp_path_factory, compose_tiny):
    """Roles at step 0 and at the end of a run that learned the task (trained once per module)."""
    run = tmp_path_factory.mktemp("roles") / "run"
    summary = train(compose_tiny(run, "trainer.limit_train_batches=1.0", *LEARNS))
    table = read_table(run / "head_metrics.parquet")
    roles = table[table.metric == "role"]
    first = {ROLES[int(v)] for v in roles[roles.step == 0].value}
    last = {ROLES[int(v)] for v in roles[roles.step == roles.step.max()].value}
    return summary, first, last


@pytest.mark.slow
def test_long_range_role_is_learned_not_given(learned_roles):
    summary, first, last = learned_roles
    assert summary["val_acc"] > 0.9, "the task was not learned; roles would mean nothing"
    assert "long_range" in last, last
    assert "long_range" not in first, first


@pytest.mark.slow
@pytest.mark.xfail(reason="the bigram feature is solved by a content head (y attends to x), which is "
                   "not previous-token when averaged over all queries; a task that plants a "
                   "positional previous-token head is still to be designed", strict=True)
def test_previous_token_role_is_recovered(learned_roles):
    _, _, last = learned_roles
    assert "previous_token" in last, last
