"""`experiment=sweep_files`: a sweep on the user's own data keeps the user's model and settings (unlike
sweep_synthetic), runs end to end, and the sweep's folder is the last line printed."""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from tests._runs import cli_command, cli_env


def composed(*overrides: str):
    GlobalHydra.instance().clear()
    with initialize_config_module("headlab.conf", version_base="1.3"):
        return compose("train", overrides=list(overrides), return_hydra_config=True)


def test_sweep_files_keeps_the_users_model_optimiser_and_schedule():
    mine = ["data.files.train=/abs/my.csv", "model.d_model=96", "model.pooling=mean", "optim.lr=5e-4", "trainer.max_epochs=7"]
    plain = composed("data=files", *mine)
    swept = composed("sweep=heads", "experiment=sweep_files", *mine)
    for group in ("model", "optim", "data"):
        assert OmegaConf.to_container(swept[group]) == OmegaConf.to_container(plain[group]), group
    assert swept.trainer.max_epochs == 7 and swept.data.files.train == "/abs/my.csv"
    assert swept.callbacks.head_metrics.get("query_tokens") in (None, [])  # no synthetic marker token 'y'
    assert swept.sweep_name == "heads-files"
    assert dict(swept.hydra.sweeper.params) == {"model.n_heads": "1,2,4,8,16", "seed": "0,1,2"}
    # the synthetic base, by contrast, swaps the model and asks for role@y (what the issue found)
    synthetic = composed("sweep=heads", "data=files", *mine[:1])
    assert (synthetic.model.d_model, synthetic.model.pooling, list(synthetic.callbacks.head_metrics.query_tokens)) == (64, "mean", ["y"])


@pytest.mark.slow
def test_a_sweep_on_a_csv_runs_and_prints_its_folder_last(tmp_path):
    data = tmp_path / "my.csv"
    with open(data, "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["text", "label"])
        out.writerows([f"the {c} one is {label}", label] for c in ("red", "blue") for label in ("cat", "dog", "fox") for _ in range(5))
    result = subprocess.run(cli_command("-m", "sweep=heads", "experiment=sweep_files", f"data.files.train={data}",
                                        "model.n_heads=1,2", "seed=0", "model.d_model=16", "model.n_layers=1",
                                        "trainer.max_steps=2", "threads=1", "callbacks.head_metrics.figures=false"),
                            capture_output=True, text=True, env=cli_env(tmp_path), cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    sweep = Path(lines[-1])
    assert sweep.parent == tmp_path / "logs" / "sweeps" / "heads-files"
    assert {str(sweep / "0"), str(sweep / "1")} <= set(lines[:-1])
    assert (sweep / "multirun.yaml").is_file() and (sweep / "1" / "summary.json").is_file()


@pytest.mark.slow
def test_the_docs_command_for_sweeps_on_your_data_runs_as_written(tmp_path):
    """docs/sweeps.md "Sweeps on your data": its bash block, run as it is written (the venv's bin/ for
    `.venv/bin/`), from an empty folder: 6 completed jobs, and the sweep's folder printed last."""
    import json
    import re
    import sys

    text = (Path(__file__).parents[2] / "docs" / "sweeps.md").read_text()
    section = text.split("## Sweeps on your data", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    script = block.replace(".venv/bin/", str(Path(sys.executable).parent) + "/")
    result = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True, env=cli_env(tmp_path),
                            cwd=tmp_path, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    sweep = Path(result.stdout.strip().splitlines()[-1])
    jobs = sorted(p for p in sweep.iterdir() if p.name.isdigit())
    assert len(jobs) == 6 and sweep.parent.name == "heads-files"
    assert all(json.loads((job / "summary.json").read_text())["status"] == "completed" for job in jobs)
