"""`headlab-llc RUN_DIR` end to end on tiny runs (an induction LM and a classifier): which checkpoints,
the rows it adds to head_metrics.parquet (the training's rows kept byte for byte, a rerun replacing its
own rows, never duplicating them), llc.parquet / llc.json / the figure; bad input is one line, exit 2,
nothing written."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("devinterp", reason="devinterp not installed: pip install -e '.[llc]'")

from headlab.tasks.llc import HEAD_METRICS_WRITTEN, LLCSettings, log_spaced, replace_llc_parts  # noqa: E402
from tests._runs import TINY, compose_train_config, file_listing, train_keeping_threads  # noqa: E402

KEEP = "+callbacks.checkpoint.keep_every_n_train_steps=2"
TINY_LM = ["experiment=induction", "model.n_heads=1", "trainer.max_steps=6", "data.n_train=192", "data.n_eval=32", "data.probe_size=8",
           "callbacks.lm_metrics.every_n_steps=3", "callbacks.lm_metrics.figures=false", "trainer.enable_model_summary=false",
           "callbacks.lm_metrics.standard_probe_size=8", KEEP]
FAST = ["llc.chains=1", "llc.draws=4", "llc.burnin=0", "llc.batch_size=8", "llc.max_sequences=16", "llc.figures=false"]


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("lm") / "run"
    train_keeping_threads(compose_train_config(run, [*TINY_LM, "threads=1"]))
    return run


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("clf") / "run"
    train_keeping_threads(compose_train_config(run, [*TINY, KEEP, "callbacks.head_metrics.figures=false", "threads=1"]))
    return run


@pytest.fixture
def call(monkeypatch, capsys, tmp_path):
    """`call(*args)`: headlab-llc's entry point in this process; (exit code, stdout, stderr)."""
    from hydra.core.global_hydra import GlobalHydra

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HEADLAB_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("TQDM_DISABLE", "1")

    def _call(*args: str) -> tuple[int, str, str]:
        main = importlib.import_module("headlab.cli.llc").main
        monkeypatch.setattr(sys, "argv", ["headlab-llc", *args])
        try:
            code = main()
        finally:
            GlobalHydra.instance().clear()
        out = capsys.readouterr()
        return int(code or 0), out.out, out.err

    return _call


def _copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    return copy


def _parts(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run / "head_metrics.parquet").iterdir())}


def test_log_spaced_keeps_first_and_last_and_is_dense_early():
    steps = list(range(100, 3001, 100))
    picked = log_spaced(steps, 6)
    assert picked[0] == 100 and picked[-1] == 3000 and len(picked) == 6
    gaps = [b - a for a, b in zip(picked, picked[1:])]
    assert gaps == sorted(gaps)  # each gap at least the one before it
    assert log_spaced([5, 1, 3], 6) == [1, 3, 5] and log_spaced([0, 10, 20], 1) == [20]
    assert log_spaced([0, 2, 4, 6], 3) == [0, 2, 6]  # log(1 + step): step 0 counts


def test_the_llc_keys_and_defaults_are_the_documented_ones():
    """The sampler's keys come from SGLDSettings (no copy to keep in step); the user's keys and defaults, written
    out by hand (docs/language_models.md), must not move with it."""
    from dataclasses import asdict

    from headlab.interventions.llc import SGLDSettings

    assert asdict(LLCSettings()) == {
        "checkpoints": 6, "steps": None, "whole_model": True, "split": "train", "max_sequences": 512, "lr": 1e-3,
        "localization": 100.0, "nbeta": 30.0, "chains": 2, "draws": 100, "burnin": 50, "batch_size": 32, "seed": 0,
        "flat_tolerance": 0.2, "trend_alpha": 0.05, "figures": True, "device": "cpu", "threads": 1}
    assert isinstance(LLCSettings(), SGLDSettings)  # what compute hands the sampler


def test_an_lm_run_gets_rllc_rows_and_a_rerun_replaces_them(lm_run, tmp_path, call):
    run = _copy(lm_run, tmp_path)
    before = _parts(run)
    code, out, err = call(str(run), *FAST, "llc.checkpoints=2")
    assert code == 0, err
    assert "2 of 3 saved checkpoints, log-spaced in step (llc.checkpoints=2): steps 2, 6" in out
    table = pd.read_parquet(run / "head_metrics.parquet")
    llc = table[table["metric"].isin(HEAD_METRICS_WRITTEN)]
    assert sorted(llc["step"].unique()) == [2, 6]
    assert len(llc) == 2 * 2 * 2 * 1  # steps x (rllc, rllc_std) x layers x heads
    assert (llc["layer"] >= 0).all() and not llc.duplicated(["step", "layer", "head", "metric"]).any()
    after = _parts(run)
    assert {k: v for k, v in after.items() if k in before} == before  # the training's parts, byte for byte
    estimates = pd.read_parquet(run / "llc.parquet")
    whole = estimates[estimates["metric"] == "llc"]
    assert whole[["layer", "head"]].values.tolist() == [[-1, -1], [-1, -1]] and len(estimates) == 2 * 3
    heads = estimates[estimates["metric"] == "rllc"].sort_values(["step", "layer", "head"])
    rows = llc[llc["metric"] == "rllc"].sort_values(["step", "layer", "head"])
    assert heads["value"].tolist() == rows["value"].tolist()

    code, out, err = call(str(run), *FAST, "llc.steps=[4,6]", "llc.seed=1")  # another seed, other steps
    assert code == 0, err
    again = pd.read_parquet(run / "head_metrics.parquet")
    llc_again = again[again["metric"].isin(HEAD_METRICS_WRITTEN)]
    assert sorted(llc_again["step"].unique()) == [4, 6] and len(llc_again) == len(llc)  # step 2's rows gone, none twice
    assert not llc_again.duplicated(["step", "layer", "head", "metric"]).any()
    assert not llc_again.set_index(["step", "layer", "head", "metric"])["value"].loc[6].equals(
        llc.set_index(["step", "layer", "head", "metric"])["value"].loc[6])
    rest = lambda t: t[~t["metric"].isin(HEAD_METRICS_WRITTEN)].reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(rest(again), rest(table))
    assert sorted(pd.read_parquet(run / "llc.parquet")["step"].unique()) == [4, 6]


def test_a_classifier_run_gets_every_heads_rllc_and_the_figure(classifier_run, tmp_path, call):
    run = _copy(classifier_run, tmp_path)
    code, out, err = call(str(run), *FAST[:-1], "llc.checkpoints=1", "llc.split=val")
    assert code == 0, err
    assert "1 of 3 saved checkpoints" in out and (run / "figures" / "llc.png").stat().st_size > 10_000
    estimates = pd.read_parquet(run / "llc.parquet")
    assert estimates["step"].unique().tolist() == [6]
    assert estimates[["layer", "head"]].values.tolist() == [[-1, -1], [0, 0], [0, 1], [1, 0], [1, 1]]
    report = __import__("json").loads((run / "llc.json").read_text())
    assert report["model"] == "classifier" and report["checkpoints"][0]["seconds_per_head"] > 0


@pytest.mark.parametrize("case", ["not a run", "no checkpoints", "unsaved step", "bad setting"])
def test_bad_input_is_one_line_exit_2_and_nothing_written(case, lm_run, tmp_path, call):
    run = _copy(lm_run, tmp_path)
    args = [str(run), *FAST]
    if case == "not a run":  # a folder with a checkpoint, but no config a run records
        shutil.rmtree(run / "segments", ignore_errors=True)
        shutil.rmtree(run / ".hydra", ignore_errors=True)
        says = "not a headlab run directory"
    elif case == "no checkpoints":
        shutil.rmtree(run / "checkpoints")
        says = "has no checkpoints"
    elif case == "unsaved step":
        args.append("llc.steps=[3]")
        says = "has no checkpoint at llc.steps [3] (saved steps: 2, 4, 6)"
    else:
        args.append("llc.draws=2")
        says = "invalid config llc.draws=2: expected an integer >= 4"
    listing = file_listing(run)
    code, out, err = call(*args)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, (out, err)
    assert file_listing(run) == listing


def test_replace_llc_parts_never_touches_parts_with_other_metrics(tmp_path):
    from headlab.store.tables import append_part

    table = tmp_path / "head_metrics.parquet"
    row = lambda step, metric, value: pd.DataFrame({"run_id": ["r"], "step": [step], "epoch": [0], "layer": [0],  # noqa: E731
                                                    "head": [0], "metric": [metric], "value": [value]})
    append_part(table, 2, row(2, "entropy", 1.0))
    append_part(table, 2, pd.concat([row(2, "rllc", 9.0), row(2, "entropy", 2.0)]))  # mixed: not headlab-llc's
    replace_llc_parts(table, {2: row(2, "rllc", 0.5), 4: row(4, "rllc", 0.7)})
    replace_llc_parts(table, {2: row(2, "rllc", 0.6)})
    frame = pd.read_parquet(table).sort_values(["step", "metric", "value"])
    assert frame[["step", "metric", "value"]].values.tolist() == [[2, "entropy", 1.0], [2, "entropy", 2.0],
                                                                   [2, "rllc", 0.6], [2, "rllc", 9.0]]
    assert sorted(p.name for p in table.iterdir()) == ["part-000000002-0000.parquet", "part-000000002-0001.parquet",
                                                       "part-000000002-0002.parquet"]
