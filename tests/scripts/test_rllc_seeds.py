"""scripts/rllc_seeds.py on planted run dirs: separated curves score ARI 1, stage dates land where planted."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd

from headlab.store.tables import append_part

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "rllc_seeds.py"
_spec = importlib.util.spec_from_file_location("rllc_seeds", SCRIPT)
rllc_seeds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rllc_seeds)  # in-process: a subprocess would spend ~15 s importing torch again
STEPS = [100, 200, 400, 600, 800, 1000, 1200, 1400, 1600, 2000, 3000]


def _planted_run(folder: Path, seed: int) -> Path:
    """Layer 0: 2 previous-token heads rising at 500, 2 'other'; layer 1: 3 induction heads rising at
    1,300 (onset 1,200), 1 'other' flat."""
    folder.mkdir()
    rng = np.random.default_rng(seed)
    roles = [["previous", "previous", "other", "other"], ["induction", "induction", "induction", "other"]]
    mids = [[500, 500, 2500, 2500], [1300, 1300, 1300, None]]
    onsets = {f"L{li}H{hi}": (1200 if roles[li][hi] == "induction" else None) for li in range(2) for hi in range(4)}
    summary = {"run_id": folder.name, "status": "completed",
               "lm": {"final_roles": roles, "induction_onset_steps": onsets, "loss_drop_step": 1200}}
    (folder / "summary.json").write_text(json.dumps(summary))
    s = np.array(STEPS, dtype=float)
    for step_i, step in enumerate(STEPS):
        rows = []
        for li in range(2):
            for hi in range(4):
                mid = mids[li][hi]
                curve = np.full(s.size, 0.05) if mid is None else 1 / (1 + np.exp(-(s - mid) / 60))
                rows.append({"run_id": folder.name, "step": step, "epoch": 0, "layer": li, "head": hi, "metric": "rllc",
                             "value": float(curve[step_i] + rng.normal(0, 0.005))})
        append_part(folder / "head_metrics.parquet", step, pd.DataFrame(rows))
    whole = 5 + 10 / (1 + np.exp(-(s - 1300) / 60))
    rows = pd.DataFrame({"step": STEPS, "layer": -1, "head": -1, "metric": "llc", "value": whole, "flat": True})
    heads = pd.DataFrame([{"step": st, "layer": li, "head": hi, "metric": "rllc", "value": 0.0, "flat": (st, li, hi) != (200, 1, 3)}
                          for st in STEPS for li in range(2) for hi in range(4)])
    pd.concat([rows, heads], ignore_index=True).to_parquet(folder / "llc.parquet")
    return folder


def test_planted_runs_separate_and_date_their_stages(tmp_path, capsys):
    runs = [str(_planted_run(tmp_path / f"seed{s}", s)) for s in range(3)]
    out = tmp_path / "out.json"
    assert rllc_seeds.main([*runs, "--json", str(out), "--figure", str(tmp_path / "f.png")]) == 0
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads(out.read_text())["summary"]
    assert summary["primary"]["aris"] == [1.0, 1.0, 1.0] and summary["primary"]["n_seeds"] == 3
    assert summary["layer1"]["aris"] == [1.0, 1.0, 1.0]  # the flat 'other' head sits apart from the induction heads
    # planted rise centred at 1,300, sampled at 1,200 / 1,400: the steepest interval's middle is 1,300, 100 after onset
    assert summary["stages"]["d_steepest"] == [100.0, 100.0, 100.0]
    assert summary["stages"]["llc_minus_drop"] == [100.0, 100.0, 100.0]
    assert "| seed0 |" in capsys.readouterr().out
    seed = json.loads(out.read_text())["seeds"][0]
    assert seed["n_estimates"] == 88 and seed["not_flat"] == 1


def test_a_run_without_rllc_rows_is_one_line_exit_2(tmp_path, capsys):
    run = tmp_path / "bare"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"lm": {"final_roles": [["other"]]}}))
    append_part(run / "head_metrics.parquet", 0, pd.DataFrame(
        [{"run_id": "bare", "step": 0, "epoch": 0, "layer": 0, "head": 0, "metric": "induction_score", "value": 0.1}]))
    assert rllc_seeds.main([str(run)]) == 2
    err = capsys.readouterr().err
    assert "no rllc rows" in err and len(err.strip().splitlines()) == 1


def test_steps_keeps_the_common_grid_and_names_a_missing_step(tmp_path, capsys):
    run = str(_planted_run(tmp_path / "seed0", 0))
    out = tmp_path / "out.json"
    assert rllc_seeds.main([run, "--steps", "200,600,1000,1200,1600", "--json", str(out)]) == 0
    seed = json.loads(out.read_text())["seeds"][0]
    assert seed["steps"] == [200, 600, 1000, 1200, 1600] and len(seed["curves"][0]) == 5
    # rise centred at 1,300: 0.16 at 1,200, ~1 at 1,600: per step 0.0021 over 1,200-1,600 against 0.0008 over
    # 1,000-1,200, so the coarser grid dates it at 1,400 (the middle of 1,200-1,600), 100 late
    assert seed["stages"]["L1H0"]["steepest"] == 1400.0
    assert rllc_seeds.main([run, "--steps", "200,900"]) == 2
    assert "step(s) [900]" in capsys.readouterr().err
