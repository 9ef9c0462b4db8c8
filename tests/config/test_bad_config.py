"""Every configuration mistake fails before training with one line: key, value, what is allowed."""

from __future__ import annotations

import pytest

from headlab.config.app import compose_train
from headlab.tasks.train import train
from headlab.errors import ConfigError
from tests._runs import run_cli, train_in_process

# (override, key in the message, value in the message); tests/tasks/test_train.py covers
# model.n_heads=3, model.pos_encoding=spiral, optim.lr=0, data.max_len=1, every_n_steps=0.
MISTAKES = [
    ("model.n_layers=0", "model.n_layers", "0"),
    ("model.n_heads=0", "model.n_heads", "0"),
    ("model.d_model=0", "model.d_model", "0"),
    ("model.d_model=-8", "model.d_model", "-8"),
    ("model.d_ff=0", "model.d_ff", "0"),
    ("model.d_head=0", "model.d_head", "0"),
    ("model.pos_encoding=rotary", "model.pos_encoding", "rotary"),
    ("optim.lr=-0.001", "optim.lr", "-0.001"),
    ("data.max_len=0", "data.max_len", "0"),
    ("data.batch_size=0", "data.batch_size", "0"),
    ("data.probe_size=0", "data.probe_size", "0"),
    ("data.probe_size=5000", "data.probe_size", "5000"),  # larger than the validation split
    ("callbacks.head_metrics.every_n_steps=-5", "every_n_steps", "-5"),
    ("callbacks.checkpoint.every_n_train_steps=0", "callbacks.checkpoint.every_n_train_steps", "0"),
    ("seed=-1", "seed", "-1"),
    ("resume=maybe", "resume", "maybe"),
]


@pytest.mark.parametrize("override, key, value", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_mistake_fails_before_training_naming_key_and_value(tmp_path, tiny_config, override, key, value):
    run = tmp_path / "bad"
    with pytest.raises(ConfigError) as info:
        train(tiny_config(run, override))
    message = str(info.value)
    assert key in message and value in message and "expected" in message
    assert "\n" not in message
    assert not (run / "checkpoints").exists() and not (run / "head_metrics.parquet").exists()


@pytest.mark.parametrize("override, options", [
    ("data=foo", ["files", "synthetic", "zh_reviews"]),
    ("logger=nope", ["csv", "many", "tensorboard", "wandb"]),
    ("hydra/launcher=slurmx", ["basic", "joblib", "submitit_local", "submitit_slurm"]),  # plugins' options too
    ("callbacks=fancy", ["default", "none"]),
])
def test_unknown_group_option_names_group_value_and_options(override, options):
    group, value = override.split("=")
    with pytest.raises(ConfigError) as info:
        compose_train([override])
    message = str(info.value)
    assert message.startswith(f"invalid config {group}='{value}': expected one of ")
    assert all(option in message for option in options) and f"(the config group {group}/)" in message


def test_known_group_options_and_value_overrides_pass_the_group_check():
    compose_train(["data=synthetic", "logger=many", "hydra/launcher=joblib", "model.n_heads=3"])


def test_unknown_data_name_in_a_real_process_is_one_line_exit_2(tmp_path):
    result = run_cli(tmp_path, "data=foo", timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "headlab-train: error: invalid config data='foo': expected one of en_polarity, files, files_lm, multidomain, repeat_tokens, synthetic, zh_reviews, zh_reviews_lm (the config group data/)"]
    assert not (tmp_path / "logs").exists()  # nothing was created


def test_probe_larger_than_split_through_main_is_one_line_exit_2(tmp_path, monkeypatch, capfd):
    """Refused when the data are split, inside the job (the config check cannot know the split's size)."""
    result = train_in_process(tmp_path, monkeypatch, capfd, "data=synthetic", "data.synthetic.n=200", "data.probe_size=500")
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("headlab-train: error: invalid config data.probe_size=500")
    assert "Traceback" not in result.stderr
