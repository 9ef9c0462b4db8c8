"""hydra/launcher=slurm: headlab's documented SLURM fields reach the sbatch script submitit writes."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

submitit = pytest.importorskip("submitit")


def _launcher(*overrides: str):
    GlobalHydra.instance().clear()
    with initialize_config_module("headlab.conf", version_base="1.3"):
        return compose("train", overrides=list(overrides), return_hydra_config=True).hydra.launcher


def _sbatch_text(launcher, folder, monkeypatch) -> str:
    """The sbatch script for one job, with the parameters handed over as the submitit plugin does
    (generic keys as they are, SLURM-only keys prefixed `slurm_`). No cluster is needed to write it."""
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from submitit.slurm.slurm import SlurmExecutor

    monkeypatch.setattr(SlurmExecutor, "affinity", classmethod(lambda cls: 1))  # pretend srun exists
    params = OmegaConf.to_container(launcher, resolve=False)
    for key in ("_target_", "submitit_folder", "max_num_timeout"):
        params.pop(key)
    params["name"] = "headlab-job"
    generic = set(OmegaConf.structured(BaseQueueConf).keys())
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    executor.update_parameters(**{k if k in generic else f"slurm_{k}": v for k, v in params.items()})
    return executor._executor._make_submission_file_text("python -m headlab.cli.train", "0")


def test_slurm_defaults_and_overrides_become_sbatch_options(tmp_path, monkeypatch):
    launcher = _launcher("sweep=heads", "hydra/launcher=slurm", "hydra.launcher.partition=cpu",
                         "hydra.launcher.account=lab", "hydra.launcher.timeout_min=30")
    assert launcher._target_.endswith("SlurmLauncher")
    script = _sbatch_text(launcher, tmp_path, monkeypatch)
    for line in ("--partition=cpu", "--account=lab", "--time=30", "--cpus-per-task=4", "--mem=4GB"):
        assert f"#SBATCH {line}" in script, script
    assert "--gpus" not in script and "--gres" not in script


def test_slurm_rejects_a_misspelt_field():
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="partiton"):
        _launcher("hydra/launcher=slurm", "hydra.launcher.partiton=cpu")


@pytest.mark.parametrize("name", ["joblib", "submitit_local", "submitit_slurm", "slurm"])
def test_every_documented_launcher_composes_with_a_sweep(name):
    launcher = _launcher("sweep=smoke", f"hydra/launcher={name}")
    assert "_target_" in launcher
