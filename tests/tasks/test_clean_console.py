"""Clean consoles (issue 35): one line per log record in a Hydra job, no wandb 'anonymous' deprecation,
no Lightning warnings the user can do nothing about, no probe warning repeated per rebuilt run, no numpy
RuntimeWarning from the sweep importance table."""

from __future__ import annotations

import io
import logging
import warnings

import pytest


def test_a_lightning_record_reaches_the_console_once_under_a_root_handler():
    import lightning  # noqa: F401 - adds Lightning's own console handlers

    from headlab.tasks.job import LIGHTNING_LOGGERS, one_line_per_record

    saved = {name: (list(logging.getLogger(name).handlers), logging.getLogger(name).propagate) for name in LIGHTNING_LOGGERS}
    stream = io.StringIO()
    root = logging.StreamHandler(stream)  # what Hydra's job_logging installs
    logging.getLogger().addHandler(root)
    lightning_console = io.StringIO()
    logging.getLogger("lightning").addHandler(logging.StreamHandler(lightning_console))  # as `import lightning` does
    logging.getLogger("lightning").propagate = True
    try:
        logging.getLogger("lightning.pytorch.utilities.rank_zero").info("before")
        assert "before" in lightning_console.getvalue() and "before" in stream.getvalue()  # twice: the bug
        one_line_per_record()
        logging.getLogger("lightning.pytorch.utilities.rank_zero").info("Seed set to 42")
        logging.getLogger("lightning.fabric.utilities.seed").info("Seed set to 43")
        assert "Seed" not in lightning_console.getvalue()
        assert stream.getvalue().count("Seed set to 42") == 1 and stream.getvalue().count("Seed set to 43") == 1
    finally:
        logging.getLogger().removeHandler(root)
        for name, (handlers, propagate) in saved.items():
            logger = logging.getLogger(name)
            logger.handlers[:] = handlers
            logger.propagate = propagate


def test_known_lightning_warnings_are_quiet_and_others_are_not():
    from headlab.tasks.job import quiet_known_warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_known_warnings()
        warnings.warn("`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec)`", DeprecationWarning)
        warnings.warn("Experiment logs directory /x/ exists and is not empty. Previous log files ...", UserWarning)
        warnings.warn("something else", UserWarning)
    assert [str(w.message) for w in caught] == ["something else"]


def test_the_wandb_logger_is_built_without_the_deprecated_anonymous_setting(tmp_path, tiny_config):
    from headlab.lit.loggers import build_loggers

    cfg = tiny_config(tmp_path / "run", "logger=wandb")
    [logger] = build_loggers(cfg, "run")
    assert "anonymous" not in logger._wandb_init and logger._wandb_init["project"] == "headlab"


def test_rebuilding_a_runs_data_does_not_repeat_the_probe_warning(tmp_path, caplog):
    from omegaconf import OmegaConf

    from headlab.data import TextDataModule
    from headlab.reload import build_datamodule

    data = tmp_path / "d.csv"
    data.write_text("text,label\n" + "".join(f"w{i} {'ab'[i % 2]},{'ab'[i % 2]}\n" for i in range(40)))
    node = {"_target_": "headlab.data.TextDataModule", "source": "files", "files": {"train": str(data)}}
    with caplog.at_level(logging.WARNING, logger="headlab.data"):
        TextDataModule("files", files={"train": str(data)}).setup()
        assert sum("data.probe_size=256" in r.getMessage() for r in caplog.records) == 1  # training says it
        build_datamodule(OmegaConf.create({"data": node}))
        assert sum("data.probe_size=256" in r.getMessage() for r in caplog.records) == 1  # a rebuild does not
    assert logging.getLogger("headlab.data").level == logging.NOTSET


def test_shuffled_tau_stats_of_a_one_head_layer_are_nan_without_a_warning():
    from headlab.sweep.importance import _shuffled_stats

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stats = _shuffled_stats([float("nan")] * 5)
        assert stats["tau_shuffled_mean"] != stats["tau_shuffled_mean"]  # NaN
        assert _shuffled_stats([0.5, float("nan"), -0.5]) == {"tau_shuffled_mean": 0.0, "tau_shuffled_std": pytest.approx(0.5)}
