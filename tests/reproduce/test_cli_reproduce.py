"""headlab-reproduce: the job list (dry run), a report from a sweep folder, and refusals."""

from __future__ import annotations

import pandas as pd

from headlab.cli.reproduce import main
from tests.reproduce.test_verdicts import SPECS, heads_runs


def test_the_quick_job_list_runs_each_sweep_once_for_all_claims_that_read_it(capsys):
    assert main(["--jobs", "--specs", str(SPECS)]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("# heads-zh_reviews: C8, C10, C15, C16")
    zh = lines[at + 1]
    assert zh.startswith(".venv/bin/headlab-train -m sweep=heads hydra/launcher=joblib hydra.launcher.n_jobs=2 "
                         "hydra.sweep.dir=logs/sweeps/heads-zh_reviews/reproduce resume=auto experiment=sweep_zh seed=0,1,2 "
                         "model.n_heads=4,8,16") or "headlab-train -m sweep=heads" in zh
    assert zh.endswith("sweep_name=heads-zh_reviews callbacks.head_metrics.figures=false")  # the quick default
    assert all(line.count("head_metrics.figures=false") == 1 for line in lines if " -m sweep=" in line)  # C11 sets it too
    assert lines[at + 2] == ("  then on each completed job with model.n_heads=8: "
                             "headlab-prune JOB_DIR prune.ranking=ablation prune.max_drop=0.005")  # C10
    assert lines[at + 3].endswith("headlab-aggregate logs/sweeps/heads-zh_reviews/reproduce")
    assert sum("-m sweep=heads " in line for line in lines) == 2  # synthetic and zh_reviews
    assert lines[-2].endswith("headlab-analyze-hf data=en_news threads=1 run_dir=logs/runs/reproduce/c17-minilm-en_news")
    assert lines[-1].startswith("# 10 sweeps, 1 runs; computed without training: C1; no evidence yet (not measured): ")
    assert main(["--jobs", "--scale", "full", "--specs", str(SPECS)]) == 0
    full = capsys.readouterr().out.splitlines()
    commands = [line for line in full if " -m sweep=" in line]
    assert len(commands) == 10 and all("hydra/launcher=slurm" in line and "figures" not in line for line in commands)
    assert [line for line in full if line.startswith("# heads")] == ["# heads-zh_reviews-full: C2, C8, C10, C14, C15, C18",
                                                                   "# heads_width-zh_reviews-full: C16"]


def test_a_report_from_an_explicit_sweep_folder(tmp_path, capsys):
    sweep = tmp_path / "my_heads_sweep"
    (sweep / "aggregate").mkdir(parents=True)
    heads_runs([0.85, 0.86, 0.88], [0.83, 0.845, 0.85]).to_csv(sweep / "aggregate" / "sweep_runs.csv", index=False)
    out = tmp_path / "report"
    args = ["--specs", str(SPECS), "--only", "c8,C10", "--evidence", f"heads-zh_reviews={sweep}", "--out", str(out),
            "--sweeps-root", str(tmp_path / "none")]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "  C8  supported" in printed and " C10  not measured" in printed
    assert list(pd.read_csv(out / "claims.csv")["verdict"]) == ["supported", "not measured"]


def test_wrong_arguments_exit_2_with_one_line(tmp_path, capsys):
    assert main(["--specs", str(tmp_path)]) == 2
    assert "a folder holding claim specs" in capsys.readouterr().err
    assert main(["--specs", str(SPECS), "--evidence", "heads-synthetic"]) == 2
    assert "SWEEP_NAME=DIR" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
