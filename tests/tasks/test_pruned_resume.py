"""A checkpoint whose heads headlab-prune removed is another network: `resume=true` refuses it with the
shape named (its ModelConfig still says the trained n_heads, so only `pruned_heads` tells)."""

from __future__ import annotations

import shutil

import pytest

from headlab.cli.prune import main as prune_main
from headlab.tasks.train import train
from headlab.errors import ConfigError
from headlab.lit.checkpointing import load_checkpoint
from tests._runs import file_listing


@pytest.fixture(scope="module")
def pruned_run(tmp_path_factory, compose_tiny):
    """A finished tiny run (2 layers x 2 heads) and one head of it removed by headlab-prune."""
    run = tmp_path_factory.mktemp("pruned") / "run"
    train(compose_tiny(run, "callbacks.head_metrics.figures=false", "test=false"))
    assert prune_main([str(run), "prune.ranking=random", "prune.fraction_per_step=0.25", "prune.max_drop=1.0",
                       "prune.figures=false"]) == 0
    return run


def test_resume_from_a_pruned_checkpoint_names_the_shape(pruned_run, compose_tiny, tmp_path):
    run = copy_run(pruned_run, tmp_path)
    pruned = load_checkpoint(run / "pruned" / "random-ft0.ckpt")
    removed = pruned["hyper_parameters"]["pruned_heads"]
    assert sum(len(h) for h in removed) >= 1 and pruned["hyper_parameters"]["model_config"]["n_heads"] == 2
    shutil.copyfile(run / "pruned" / "random-ft0.ckpt", run / "checkpoints" / "last.ckpt")
    before = file_listing(run)
    with pytest.raises(ConfigError) as info:
        train(compose_tiny(run, "resume=true"))
    message = str(info.value)
    assert len(message.splitlines()) == 1
    heads_left = ", ".join(str(2 - len(h)) for h in removed)
    assert "pruned" in message and f"heads per layer: checkpoint [{heads_left}] vs config [2, 2]" in message
    assert "last.ckpt" in message
    assert file_listing(run) == before  # refused before anything of the run is touched


def test_unpruned_last_checkpoint_still_resumes_past_the_check(pruned_run, compose_tiny, tmp_path):
    """The check reads `pruned_heads` only: the run's own last.ckpt goes on to the next check (settings)."""
    run = copy_run(pruned_run, tmp_path)
    with pytest.raises(ConfigError, match="resume_allow"):
        train(compose_tiny(run, "resume=true", "optim.lr=0.5"))


def copy_run(run, tmp_path):
    """A copy each test may change."""
    return shutil.copytree(run, tmp_path / "run")
