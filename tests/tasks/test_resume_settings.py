"""A resume that is allowed to change an optimiser setting really trains with the new value
(Lightning's restored optimiser state would otherwise keep the first start's)."""

from __future__ import annotations

import torch

from headlab.tasks.train import train

QUIET = ("callbacks.head_metrics.figures=false", "test=false", "optim=adamw_constant")


def _param_groups(run):
    checkpoint = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    return checkpoint["optimizer_states"][0]["param_groups"]


def test_an_allowed_lr_change_takes_effect_from_the_resumed_step(tmp_path, compose_tiny):
    run = tmp_path / "run"
    train(compose_tiny(run, *QUIET))
    assert {g["lr"] for g in _param_groups(run)} == {1e-3}
    result = train(compose_tiny(run, *QUIET, "resume=true", "trainer.max_epochs=2", "optim.lr=5e-4",
                                "optim.weight_decay=0.1", "resume_allow=[optim.lr,optim.weight_decay]"))
    assert result["status"] == "completed" and result["global_step"] == 12
    groups = _param_groups(run)
    assert [g["lr"] for g in groups] == [5e-4, 5e-4] and [g["initial_lr"] for g in groups] == [5e-4, 5e-4]
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]  # decay still on matrices only


def test_an_unchanged_resume_keeps_the_schedule_exactly(tmp_path, compose_tiny):
    """Warm-up + cosine: the rate after resuming equals the uninterrupted run's at the same step."""
    steady, split = tmp_path / "steady", tmp_path / "split"
    quiet = ("callbacks.head_metrics.figures=false", "test=false")
    train(compose_tiny(steady, *quiet, "trainer.max_epochs=2"))
    train(compose_tiny(split, *quiet))
    train(compose_tiny(split, *quiet, "resume=true", "trainer.max_epochs=2"))
    assert [g["lr"] for g in _param_groups(split)] == [g["lr"] for g in _param_groups(steady)]


def _drop_from_settings(run, key):
    """The run as an older headlab wrote it: its settings lack `key` (a key added to headlab since)."""
    import json

    from headlab.tasks.history import RESOLVED
    from headlab.store import RunDir

    path = RunDir(run).segment_dirs()[-1] / RESOLVED
    settings = json.loads(path.read_text())
    del settings[key]
    path.write_text(json.dumps(settings))


def test_a_key_added_since_the_run_started_resumes_at_its_default_and_is_refused_when_set(tmp_path, compose_tiny):
    import pytest

    from headlab.errors import ConfigError

    run = tmp_path / "run"
    train(compose_tiny(run, *QUIET))
    _drop_from_settings(run, "data.bucket_by_length")
    with pytest.raises(ConfigError, match=r"data\.bucket_by_length: run .<unset>. vs now False"):
        train(compose_tiny(run, *QUIET, "resume=true", "trainer.max_epochs=2", "data.bucket_by_length=false"))
    result = train(compose_tiny(run, *QUIET, "resume=true", "trainer.max_epochs=2"))
    assert result["status"] == "completed" and result["global_step"] == 12


def test_resume_auto_leaves_a_completed_run_alone_and_extends_or_refuses_otherwise(tmp_path, compose_tiny):
    """A sweep launched again into its folder (make reproduce-quick) must not retrain finished jobs,
    yet more epochs is still a resume and a changed setting still a refusal."""
    import pytest

    from headlab.errors import ConfigError

    run = tmp_path / "run"
    first = train(compose_tiny(run, *QUIET))
    checkpoint_before = (run / "checkpoints" / "last.ckpt").stat().st_mtime_ns
    again = train(compose_tiny(run, *QUIET, "resume=auto"))
    assert again == first  # the stored summary, nothing retrained or rewritten
    assert (run / "checkpoints" / "last.ckpt").stat().st_mtime_ns == checkpoint_before
    with pytest.raises(ConfigError, match=r"optim\.lr: run 0\.001 vs now 0\.0005"):
        train(compose_tiny(run, *QUIET, "resume=auto", "optim.lr=5e-4"))
    extended = train(compose_tiny(run, *QUIET, "resume=auto", "trainer.max_epochs=2"))
    assert extended["global_step"] == 2 * first["global_step"] and extended["resumed_from"]["step"] == first["global_step"]
