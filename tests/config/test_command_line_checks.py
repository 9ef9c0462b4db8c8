"""A command line Hydra composes once: its mistakes worded from Hydra's own errors (`config.app.explain`),
the checks of the composed config, the CheckedSweeper (every job of a -m sweep before the first starts)
and the exit code a user sees.

In-process for the messages; a handful of real `headlab-train` processes for exit code 2, one
stderr line, and nothing written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from headlab.config.app import compose_train
from headlab.tasks.train_config import validate_config
from headlab.errors import ConfigError
from tests._runs import train_in_process


def check_overrides(overrides: list[str]) -> None:
    """The command line as headlab-train meets it before anything is written: composed once, then checked."""
    validate_config(compose_train(overrides))


def test_an_unknown_key_is_one_line_listing_the_keys_never_advising_plus():
    with pytest.raises(ConfigError) as info:
        check_overrides(["data=synthetic", "foo=1"])
    message = str(info.value)
    assert message.startswith("invalid config foo=1: expected a key of the config (one of module, seed, resume,")
    assert "+foo" not in message  # Hydra's advice: +foo=1 would add a key no code reads


@pytest.mark.parametrize("override, message", [
    ("seeed=1", "invalid config seeed=1: expected a key of the config (did you mean seed?)"),
    ("trainer.max_epoch=3", "invalid config trainer.max_epoch=3: expected a key of trainer (did you mean max_epochs?)"),
    ("debugg=fast", "invalid config debugg='fast': expected a key of the config (did you mean debug?)"),  # a group unselected
])
def test_a_key_typo_suggests_the_close_key_not_plus(override, message):
    with pytest.raises(ConfigError) as info:
        check_overrides(["data=synthetic", override])
    assert str(info.value) == message  # on the parent commit: "... +seeed=... adds a new key" / "use +trainer.max_epoch=3"


@pytest.mark.parametrize("override, message", [
    ("+foo=1", "invalid config foo=1: expected a key of the config (one of "),
    ("++foo=1", "invalid config foo=1: expected a key of the config (one of "),
    ("+seeed=1", "invalid config seeed=1: expected a key of the config (did you mean seed?)"),
    ("+model.n_head=2", "invalid config model.n_head=2: expected a key of model (did you mean n_heads?)"),
])
def test_a_key_added_with_plus_must_be_a_key_the_config_knows(override, message):
    with pytest.raises(ConfigError) as info:
        check_overrides(["data=synthetic", override])  # on the parent commit: accepted silently
    assert str(info.value).startswith(message)


def test_plus_still_selects_a_group_and_sets_its_keys():
    check_overrides(["data=synthetic", "+distill=default", "teacher=x"])
    check_overrides(["data=synthetic", "+distill=logits", "+teacher=x"])  # teacher: a key distill/ adds
    check_overrides(["data=synthetic", "++seed=3", "+hydra.job.env_set.FOO=1", "+data.train_labels=10"])


def test_a_misspelt_nested_key_is_named():
    with pytest.raises(ConfigError, match=r"^invalid config trainer\.max_epoch=3"):
        check_overrides(["trainer.max_epoch=3"])


def test_unquoted_non_ascii_list_points_to_the_quoting_that_works():
    with pytest.raises(ConfigError) as info:
        check_overrides(["callbacks.head_metrics.query_tokens=[的,！]"])
    message = str(info.value)
    assert message.startswith("invalid config callbacks.head_metrics.query_tokens='[的,！]': expected a value")
    assert """'callbacks.head_metrics.query_tokens=["的","！"]'""" in message and "\n" not in message
    check_overrides(['callbacks.head_metrics.query_tokens=["的","！"]'])  # the suggestion itself passes


def test_a_sweep_without_multirun_says_how_to_write_one_value():
    with pytest.raises(ConfigError, match=r"invalid config optim\.lr='1e-3,1e-2': expected one value .* add -m"):
        check_overrides(["optim.lr=1e-3,1e-2"])


@pytest.mark.parametrize("args, culprit", [
    (["-m", "data=synthetic", "optim.lr=1e-3,abc"], "optim.lr='abc'"),  # the second value of a sweep
    (["--multirun", "data=synthetic", "model.n_heads=2,3"], "model.n_heads=3"),  # 3 does not divide 128
    (["-m", "data=synthetic", "seed=range(0,2)", "trainer.max_epochs=choice(1,abc)"], "trainer.max_epochs='abc'"),
])
def test_every_value_of_a_sweep_is_checked_before_any_job(args, culprit, tmp_path, monkeypatch):
    """The CheckedSweeper (conf/train.yaml's hydra/sweeper) refuses the sweep before the first job
    starts and before multirun.yaml is written; Hydra runs in-process here, as headlab-train runs it."""
    from hydra.core.global_hydra import GlobalHydra

    from headlab.cli.train import _hydra_main

    sweep = tmp_path / "sweep"
    monkeypatch.setattr(sys, "argv", ["headlab-train", *args, f"hydra.sweep.dir={sweep}", f"paths.log_dir={tmp_path}"])
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")  # Hydra re-raises, as headlab-train's main asks it to with -m
    try:
        with pytest.raises(ConfigError) as info:
            _hydra_main()
    finally:
        GlobalHydra.instance().clear()
    assert str(info.value).startswith(f"invalid config {culprit}: expected ")
    assert list(tmp_path.iterdir()) == []  # no sweep folder, no multirun.yaml, no job


@pytest.mark.slow
def test_a_refused_sweep_is_one_line_exit_2_and_nothing_written(tmp_path):
    result = _run(tmp_path, "-m", "data=synthetic", "model.n_heads=2,3")
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("headlab-train: error: invalid config model.n_heads=3: expected ")
    assert not (tmp_path / "logs").exists()


# ---- real processes ---------------------------------------------------------------------------------
def _run(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HEADLAB_LOG_DIR": str(tmp_path / "logs"), "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "headlab.cli.train", *overrides], capture_output=True, text=True,
                          env=env, timeout=300, cwd=tmp_path)


MISTAKES = {
    "unknown-key": (["data=synthetic", "foo=1"], "invalid config foo=1"),
    "non-ascii": (["callbacks.head_metrics.query_tokens=[的,！]"], "invalid config callbacks.head_metrics.query_tokens="),
    "missing": (["data=files"], "invalid config data.files.train='???'"),
    "text-for-int": (["data=synthetic", "trainer.max_epochs=abc"], "invalid config trainer.max_epochs='abc'"),
    "list-length": (["data=synthetic", "optim.betas=[0.9]"], "invalid config optim.betas=[0.9]"),
    "progress-bar": (["data=synthetic", "trainer.enable_progress_bar=false"], "invalid config trainer.enable_progress_bar=False"),
    "heads-not-dividing": (["data=synthetic", "model.n_heads=3"], "invalid config model.n_heads=3"),
}


def _one_line_and_nothing_written(tmp_path: Path, code: int, stderr: str, first_words: str) -> None:
    assert code == 2, stderr[-2000:]
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"headlab-train: error: {first_words}"), stderr[-2000:]
    written = [p for p in (tmp_path / "logs").rglob("*") if p.suffix in (".ckpt", ".parquet")] if (tmp_path / "logs").exists() else []
    assert written == []


def test_a_mistake_in_a_real_process_is_one_line_exit_2_and_nothing_written(tmp_path):
    overrides, first_words = MISTAKES["unknown-key"]
    result = _run(tmp_path, *overrides)
    _one_line_and_nothing_written(tmp_path, result.returncode, result.stderr, first_words)


@pytest.mark.parametrize("case", sorted(MISTAKES))
def test_a_mistake_on_the_command_line_is_one_line_exit_2_and_nothing_written(case, tmp_path, monkeypatch, capfd):
    """headlab-train's main in this process (the real process above shares its path up to the exit)."""
    overrides, first_words = MISTAKES[case]
    result = train_in_process(tmp_path, monkeypatch, capfd, *overrides)
    _one_line_and_nothing_written(tmp_path, result.returncode, result.stderr, first_words)


def test_a_value_lightning_refuses_in_its_constructor_is_one_line_before_any_folder():
    """trainer.devices=0 composes (an int), but Lightning's Trainer refuses it: built once in the check."""
    with pytest.raises(ConfigError) as info:
        check_overrides(["data=synthetic", "trainer.devices=0"])
    assert str(info.value).startswith("invalid config trainer.devices=0: expected a value lightning.pytorch.trainer.")
    assert "Trainer(devices=0)" in str(info.value)  # Lightning's own words (before: a traceback after the run dir)
