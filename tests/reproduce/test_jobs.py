"""Every sweep the claim specs ask for composes at both scales, writes where the report looks, and
runs the configs the specs' statistics select."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser

from headlab.tasks.train_config import validate_config
from headlab.errors import ConfigError
from headlab.reproduce.jobs import run_jobs, sweep_jobs
from headlab.reproduce.spec import load_spec, load_specs
from tests.reproduce.test_verdicts import SPECS

SPEC_LIST = load_specs(SPECS)


def _grid(sweep: str, cli: tuple[str, ...], program: str = "headlab-train") -> list[dict[str, str]]:
    """The jobs `<program> -m sweep=<sweep> *cli` makes, as {override key: value} (headlab-distill is
    headlab-train +distill=default)."""
    base = ["+distill=default"] if program == "headlab-distill" else []
    GlobalHydra.instance().clear()
    with initialize_config_module("headlab.conf", version_base="1.3"):
        params = compose("train", overrides=[*base, f"sweep={sweep}"], return_hydra_config=True).hydra.sweeper.params
    arguments = [f"{k}={v}" for k, v in params.items()] + [*base, f"sweep={sweep}", *cli]
    batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(arguments), max_batch_size=None)
    return [dict(o.split("=", 1) for o in job) for batch in batches for job in batch]


def _same(a: str, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


@pytest.mark.parametrize("scale", ["quick", "cpu", "full"])
def test_every_job_composes_names_its_folder_and_holds_the_selected_configs(scale):
    for job in sweep_jobs(SPEC_LIST, scale):
        cli = (*job.overrides, f"sweep_name={job.sweep_name}", *(("teacher=/nonexistent/teacher",) if job.teacher else ()))
        grid = _grid(job.sweep, cli, job.program)
        GlobalHydra.instance().clear()
        with initialize_config_module("headlab.conf", version_base="1.3"):
            cfg = compose("train", overrides=[f"{k}={v}" for k, v in grid[0].items()], return_hydra_config=True)
        validate_config(cfg)
        assert cfg.sweep_name == job.sweep_name
        for spec in (s for s in SPEC_LIST if s.claim in job.claims):
            if scale != "quick":  # the confirmatory scales hold the settings the phenomenon needs
                from omegaconf import OmegaConf

                for key, wanted in spec.prerequisite_config:
                    choice = cfg.hydra.runtime.choices.get(key) if "." not in key else None
                    got = choice if choice is not None else OmegaConf.select(cfg, key)
                    assert _same(got, wanted), (spec.claim, scale, key, got, wanted)
            for stat in spec.statistics.values():
                for where in (stat.where, stat.a or {}, stat.b or {}):
                    for key, value in where.items():
                        if "." in key or key in ("optim", "data"):  # a config key: some job must run that value
                            wanted = value if isinstance(value, list) else [value]  # a list: any of its values
                            assert all(any(_same(j.get(key), v) for j in grid) for v in wanted), (spec.claim, scale, key, value)


def test_two_specs_giving_one_folder_different_overrides_are_refused(tmp_path):
    text = (SPECS / "c16_head_width.yaml").read_text(encoding="utf-8").replace("heads_width-zh_reviews-full", "heads-zh_reviews-full")
    (tmp_path / "c16_head_width.yaml").write_text(text, encoding="utf-8")
    specs = [load_spec(SPECS / "c08_heads.yaml"), load_spec(tmp_path / "c16_head_width.yaml")]
    with pytest.raises(ConfigError, match=r"C16: evidence\.full.*a sweep_name of its own: C8 runs headlab-train heads"):
        sweep_jobs(specs, "full")


@pytest.mark.parametrize("scale", ["quick", "cpu", "full"])
def test_every_run_job_is_a_valid_headlab_analyze_hf_config(scale):
    from tests._runs import compose_command
    from headlab.tasks.pretrained import CONFIG_MODULE, AnalyzeHFConfig

    jobs = run_jobs(SPEC_LIST, scale)
    assert [j.claims for j in jobs] == [("C17",)]
    for job in jobs:
        cfg = compose_command("analyze", [*job.overrides, f"run_dir=/tmp/{job.run_name}"], CONFIG_MODULE, schema=AnalyzeHFConfig)
        assert cfg.run_dir == f"/tmp/{job.run_name}"


def test_a_folder_name_shared_by_the_two_scales_is_refused(tmp_path):
    for name in ("c08_heads.yaml", "c16_head_width.yaml"):
        text = (SPECS / name).read_text(encoding="utf-8").replace("heads_width-zh_reviews-full", "heads-zh_reviews")
        (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"c16_head_width\.yaml: evidence\.full='heads-zh_reviews'.*apart from the quick scale's"):
        load_specs(tmp_path)
