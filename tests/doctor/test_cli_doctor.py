"""headlab-doctor on run and sweep folders written to disk the way a run writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from headlab.cli.doctor import main
from headlab.store import HEAD_METRICS, HEAD_PAIRS, append_part
from tests.doctor._runs import healthy_tables


def _write_run(run_dir: Path, **summary_changes) -> Path:
    tables = healthy_tables(**summary_changes)
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text(json.dumps(tables.summary), encoding="utf-8")
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "config.yaml").write_text("optim:\n  optimizer:\n    _target_: torch.optim.AdamW\n  lr: ${x}\n")
    for name, table in ((HEAD_METRICS, tables.head_metrics), (HEAD_PAIRS, tables.head_pairs)):
        for step, rows in table.groupby("step"):
            append_part(run_dir / name, int(step), rows.assign(run_id="r", epoch=0))
    return run_dir


def test_a_healthy_run_dir_prints_every_check_ok_and_writes_doctor_json(tmp_path, capsys):
    run = _write_run(tmp_path / "run")
    assert main([str(run)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{run}: ok" and out.count("  ok  ") == 7
    written = json.loads((run / "doctor.json").read_text())
    assert written["worst"] == "ok" and len(written["checks"]) == 7


def test_a_sweep_dir_diagnoses_every_job_and_exits_1_when_one_failed(tmp_path, capsys):
    _write_run(tmp_path / "sweep" / "0")
    _write_run(tmp_path / "sweep" / "1", status="diverged", diverged_step=7)
    (tmp_path / "sweep" / "2").mkdir()  # a job that never started
    assert main([str(tmp_path / "sweep")]) == 1
    out = capsys.readouterr().out
    assert "diverged at step 7" in out and "no summary.json (not started)" in out
    assert out.splitlines()[-1] == "3 jobs: 1 ok, 0 warn, 2 fail"
    listing = json.loads((tmp_path / "sweep" / "doctor.json").read_text())
    assert [j["worst"] for j in listing["jobs"]] == ["ok", "fail", "fail"]
    assert json.loads((tmp_path / "sweep" / "1" / "doctor.json").read_text())["checks"][0]["status"] == "fail"


def test_a_bad_path_is_one_line_and_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such directory" in err
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "neither a run directory" in err
    assert not (tmp_path / "empty" / "doctor.json").exists()


def test_overrides_get_the_config_checks_before_training_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["data=synthetic", "optim=adamw_constant", "optim.lr=6e-3", "model.n_heads=8"]) == 0
    out = capsys.readouterr().out
    assert "WARN  warmup                 lr 0.006 with a warm-up of 0 steps" in out
    assert "WARN  head_width             heads are 16 wide (< 32)" in out  # d_model 128 / 8
    assert out.count("no run yet: train, then headlab-doctor RUN_DIR") == 5
    assert list(tmp_path.iterdir()) == []
    assert main(["data=synthetic"]) == 0  # the defaults: AdamW 1e-3, 5 % warm-up, 4 heads of 32
    assert "ok    warmup                 lr 0.001, warm-up 5.0% of training" in capsys.readouterr().out


def test_a_bad_override_is_one_line_and_exit_2(capsys):
    assert main(["model.n_head=8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "model.n_head" in err


# ---------------------------------------------------------------- a Hydra app: config, help, short forms

def test_short_forms_are_target_or_plan():
    from headlab.cli.doctor import short_forms

    assert short_forms(["logs/runs/a"]) == ["target=logs/runs/a"]
    assert short_forms(["optim.lr=6e-3", "model.n_heads=8", "--cfg", "job"]) == \
        ["plan=['optim.lr=6e-3','model.n_heads=8']", "--cfg", "job"]  # each item quoted: `=` inside a list
    assert short_forms(["target=a"]) == ["target=a"]  # doctor's own keys stay as they are
    assert short_forms(["plan=['data=synthetic']"]) == ["plan=['data=synthetic']"]


def test_cfg_job_and_help_print_the_keys(capsys):
    import pytest
    import yaml

    assert main(["optim.lr=6e-3", "model.n_heads=8", "--cfg", "job"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == {"target": None, "plan": ["optim.lr=6e-3", "model.n_heads=8"]}
    with pytest.raises(SystemExit) as exited:  # Hydra's --help exits itself
        main(["--help"])
    assert exited.value.code == 0
    printed = capsys.readouterr().out
    assert printed.startswith("headlab-doctor RUN_DIR | SWEEP_DIR | key=value ...: ")
    assert "\ntarget: null\n" in printed and "\nplan: []\n" in printed


def test_each_short_form_does_what_its_key_value_form_does(tmp_path, capsys):
    run = _write_run(tmp_path / "run")
    assert main([str(run)]) == 0
    short = capsys.readouterr().out
    assert main([f"target={run}"]) == 0
    assert capsys.readouterr().out == short and short.splitlines()[0] == f"{run}: ok"
    assert main(["data=synthetic", "optim=adamw_constant", "optim.lr=6e-3"]) == 0
    short = capsys.readouterr().out
    assert main(["plan=['data=synthetic','optim=adamw_constant','optim.lr=6e-3']"]) == 0
    assert capsys.readouterr().out == short and "WARN  warmup" in short


def test_neither_both_nor_a_misspelt_key_runs(tmp_path, capsys):
    for args, expected in (([], "expected either a run or sweep directory"),
                           ([f"target={tmp_path}", "plan=['data=synthetic']"], "expected either a run"),
                           (["plan=['data=synthetic']", "targte=x"], "did you mean target?")):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("headlab-doctor: error: ") and expected in err, (args, err)


def test_a_corrupt_table_part_is_a_failure_not_an_ok_run(tmp_path, capsys):
    run = _write_run(tmp_path / "run")
    part = sorted((run / HEAD_PAIRS).glob("part-*.parquet"))[1]
    part.write_bytes(part.read_bytes()[: len(part.read_bytes()) // 2])  # truncated, as a full disk leaves it
    assert main([str(run)]) == 1  # on the parent commit: exit 0, "ok", the pair checks quietly not measured
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{run}: fail"
    assert "run_files" in out and f"{HEAD_PAIRS}/{part.name}" in out and "cannot be read" in out
    assert json.loads((run / "doctor.json").read_text())["worst"] == "fail"


def test_an_unreadable_saved_config_is_a_failure_in_one_line(tmp_path, capsys):
    run = _write_run(tmp_path / "run")
    (run / ".hydra" / "config.yaml").write_text("model: [unclosed\n")
    assert main([str(run)]) == 1  # on the parent commit: exit 0, the settings checks reading {}
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if "run_files" in l)
    assert "config.yaml" in line and "saved config cannot be read" in line


def test_nan_and_inf_in_a_part_are_named_and_left_out_of_every_check(tmp_path, capsys):
    import math

    import pandas as pd

    run = _write_run(tmp_path / "run")
    part = run / HEAD_PAIRS / "part-000000000-0000.parquet"
    rows = pd.read_parquet(part)
    pair = list(zip(rows["head_a"], rows["head_b"]))
    rows.loc[pair.index((0, 1)), "value"] = math.nan
    rows.loc[pair.index((0, 2)), "value"] = math.inf
    rows.loc[pair.index((0, 3)), "value"] = 0.1
    rows.to_parquet(part, index=False)
    assert main([str(run)]) == 1
    checks = {c["check"]: c for c in json.loads((run / "doctor.json").read_text())["checks"]}
    finite = checks["finite_values"]
    assert finite["status"] == "fail"
    assert finite["evidence"]["nonfinite"] == ["head_pairs.parquet/part-000000000-0000.parquet: 2 of 16 values (js 2)"]
    # the step-0 JS over heads a < b: (0.1 + 3 x 0.3) / 4 from the finite pairs (a mean with them would be inf or nan)
    assert checks["init_variance"]["evidence"]["init_js_mean"] == pytest.approx(0.25)
    assert "FAIL" in capsys.readouterr().out


def test_a_metric_undefined_for_the_decisions_queries_is_no_failure(tmp_path, capsys):
    """From [CLS] there is no previous token: `prev_score@task` is NaN for every head of every cls-pooling run.
    Before: every such run failed `finite_values`. A conditional metric NaN for one head only still fails."""
    import math

    import pandas as pd

    run = _write_run(tmp_path / "run")
    part = run / HEAD_METRICS / "part-000000000-0000.parquet"
    rows = pd.read_parquet(part)
    heads = rows[["layer", "head"]].drop_duplicates()
    undefined = heads.assign(metric="prev_score@task", value=math.nan)
    measured = heads.assign(metric="last_attention@task", value=0.5)
    pd.concat([rows, undefined.assign(**{c: rows[c].iloc[0] for c in ("step", "epoch", "run_id")}),
               measured.assign(**{c: rows[c].iloc[0] for c in ("step", "epoch", "run_id")})]).to_parquet(part, index=False)
    assert main([str(run)]) == 0
    assert "finite_values" not in capsys.readouterr().out
    rows = pd.read_parquet(part)
    rows.loc[(rows.metric == "last_attention@task") & (rows["head"] == 0), "value"] = math.nan  # one head: diverged
    rows.to_parquet(part, index=False)
    assert main([str(run)]) == 1
    checks = {c["check"]: c for c in json.loads((run / "doctor.json").read_text())["checks"]}
    assert checks["finite_values"]["evidence"]["nonfinite"] == [
        f"{HEAD_METRICS}/part-000000000-0000.parquet: 1 of {len(rows)} values (last_attention@task 1)"]
