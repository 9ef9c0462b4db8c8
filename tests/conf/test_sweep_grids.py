"""Every versioned sweep composes and expands to its documented grid (Hydra's own sweeper logic)."""

from __future__ import annotations

import itertools
import re
from importlib import resources

import pytest
from hydra import compose, initialize_config_module
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from headlab.model import HeadlabClassifier, ModelConfig, count_parameters

HEADS = [1, 2, 4, 8, 16]
SEEDS = [0, 1, 2]
# sweep name -> (the grid as {override key: values}, jobs). docs/sweeps.md documents these.
GRIDS = {
    "heads": ({"model.n_heads": HEADS, "seed": SEEDS}, 15),
    "heads_fixed_dhead": ({"model.n_heads": HEADS, "seed": SEEDS}, 15),
    "init_scale": ({"model.init_scale": [0.25, 0.5, 1.0, 1.5, 2.0], "optim.warmup_ratio": [0.0, 0.1], "seed": SEEDS}, 30),
    "lr": ({"optim": ["adamw_constant", "adamw"], "optim.lr": [2e-3, 6e-3], "seed": SEEDS}, 12),
    "lm_roles": ({"optim": ["adamw_constant", "adamw"], "optim.lr": [1e-3, 3e-3], "seed": [0, 1]}, 8),
    "posenc": ({"model.pos_encoding": ["none", "sinusoidal", "learned", "rope", "alibi"], "seed": SEEDS}, 15),
    "data_size": ({"data.train_fraction": [0.05, 0.2, 1.0], "seed": SEEDS}, 9),
    "data_size_steps": ({"data.train_fraction": [0.05, 1.0], "seed": SEEDS}, 6),
    "smoke": ({"model.n_heads": [2, 4], "model.init_scale": [0.5, 1.0], "seed": [0, 1]}, 8),
    "templates": ({"model.template_mode": ["free", "soft", "hard"], "seed": SEEDS}, 9),
    "knockout": ({"intervention.knockout.step": [None, 50, 200, 600], "seed": SEEDS}, 12),
    "domains": ({"data": ["multidomain"], "model.domain_split_layers": [0, 1, 2], "seed": SEEDS}, 9),
    "domains_routed": ({"data": ["multidomain"], "model.domain_split_layers": [1, 2], "model.domain_router": ["soft"],
                        "seed": SEEDS}, 6),
    "distill": ({"distill": ["ce", "logits", "logits_attn_last", "logits_attn_first_middle", "attn_last", "attn_first_middle"],
                 "seed": SEEDS}, 18),
    "induction": ({"model.n_layers": [1, 2], "model.attn_only": [True, False], "seed": [0, 1, 2, 3, 4]}, 20),
    "induction_scaling": ({"data.batch_size": [16, 32, 64], "data.max_len": [33, 65], "seed": [0]}, 6),
    "induction_scaling_grid": ({"seed": SEEDS, "data.batch_size": [16, 32, 64],
                                "+sweep/induction_scaling_context": ["c17", "c25", "c33"]}, 27),
}


# What the sweep's command puts before the user's arguments (headlab-distill = headlab-train +distill=default).
ENTRY = {"distill": ["+distill=default"]}


def _compose(*overrides: str) -> DictConfig:
    GlobalHydra.instance().clear()
    with initialize_config_module("headlab.conf", version_base="1.3"):
        return compose("train", overrides=list(overrides), return_hydra_config=True)


def _jobs(sweep: str, *cli: str) -> list[list[str]]:
    """The job override lists Hydra's basic sweeper makes for `headlab-train -m sweep=<sweep> *cli`."""
    entry = ENTRY.get(sweep, [])
    params = _compose(*entry, f"sweep={sweep}").hydra.sweeper.params
    arguments = [f"{key}={value}" for key, value in params.items()] + [*entry, f"sweep={sweep}", *cli]
    overrides = OverridesParser.create().parse_overrides(arguments)
    batches = BasicSweeper.split_arguments(overrides, max_batch_size=None)
    return [list(job) for batch in batches for job in batch]


def _as_grid(jobs: list[list[str]], keys: list[str]) -> set[tuple[str, ...]]:
    def value(job: list[str], key: str) -> str:
        (found,) = [o.split("=", 1)[1] for o in job if o.split("=", 1)[0] == key]
        return found

    return {tuple(value(job, key) for key in keys) for job in jobs}


def test_every_sweep_file_is_documented_here():
    shipped = {p.name.removesuffix(".yaml") for p in resources.files("headlab.conf").joinpath("sweep").iterdir()
               if p.name.endswith(".yaml")}
    assert shipped == set(GRIDS)


@pytest.mark.parametrize("sweep", sorted(GRIDS))
def test_sweep_expands_to_its_documented_grid(sweep):
    grid, n_jobs = GRIDS[sweep]
    jobs = _jobs(sweep)
    assert len(jobs) == n_jobs
    expected = {tuple(str(v) for v in combo) for combo in itertools.product(*grid.values())}
    normalised = {tuple(str(OverridesParser.create().parse_override(f"k={v}").value()) for v in row)
                  for row in _as_grid(jobs, list(grid))}
    assert normalised == expected
    assert all(f"sweep={sweep}" in job for job in jobs)


def test_seeds_on_the_command_line_replace_the_sweeps_default_three():
    jobs = _jobs("heads", "seed=0,1,2,3,4")
    assert len(jobs) == 5 * 5
    assert _as_grid(jobs, ["seed"]) == {(str(s),) for s in range(5)}


# The classifier sweeps: sweep=induction and induction_scaling train a causal LM on repeat_tokens (their grids are checked above).
CLASSIFIER_SWEEPS = sorted(set(GRIDS) - {"induction", "induction_scaling", "induction_scaling_grid", "lm_roles"})  # the causal LM


def test_every_induction_scaling_job_fits_its_probe_and_segments():
    """A context the probe or the recurring segment does not fit would fail only when that job starts."""
    for job in _jobs("induction_scaling"):
        cfg = _compose(*job)
        data = cfg.data
        assert cfg.model.max_len == data.max_len and cfg.module._target_.endswith("CausalLMModule")
        assert 1 + data.probe_max_gap + 2 * data.probe_half_len <= data.max_len
        assert 2 * data.max_segment <= data.max_len - 1 and cfg.trainer.max_steps == 3000


@pytest.mark.parametrize("sweep", CLASSIFIER_SWEEPS)
def test_every_job_composes_to_a_valid_model(sweep):
    """A grid point that ModelConfig rejects (e.g. rope with an odd head width) would only fail
    minutes into a sweep; check every job's model here (seeds do not change the model)."""
    configs = {tuple(o for o in job if not o.startswith("seed=")) for job in _jobs(sweep)}
    for job in sorted(configs):
        cfg = _compose(*job)
        assert isinstance(_model_config(cfg), ModelConfig)
        assert cfg.threads == "auto"


@pytest.mark.parametrize("sweep", sorted(set(CLASSIFIER_SWEEPS) - {"smoke", "domains", "domains_routed"}))  # those: multidomain only
def test_sweeps_run_on_synthetic_by_default_and_on_zh_reviews_with_experiment_sweep_zh(sweep):
    entry = ENTRY.get(sweep, [])
    synthetic, zh = _compose(*entry, f"sweep={sweep}"), _compose(*entry, f"sweep={sweep}", "experiment=sweep_zh")
    assert synthetic.data.source == "synthetic" and zh.data.source == "zh_reviews"
    assert synthetic.sweep_name == f"{sweep}-synthetic" and zh.sweep_name == f"{sweep}-zh_reviews"
    assert synthetic.hydra.sweeper.params == zh.hydra.sweeper.params
    for cfg in (synthetic, zh):
        sweep_dir = cfg.hydra.sweep.dir.replace("\\", "/")
        assert f"/sweeps/{cfg.sweep_name}/" in sweep_dir


def test_smoke_sweep_is_tiny():
    cfg = _compose("sweep=smoke")
    assert cfg.sweep_name == "smoke"
    assert cfg.data.source == "synthetic" and cfg.data.synthetic.n <= 1000
    assert cfg.model.d_model <= 32 and cfg.model.n_layers == 1 and cfg.trainer.max_epochs <= 2


def _model_config(cfg: DictConfig) -> ModelConfig:
    """The model group built the way training builds it (vocabulary and classes known only then)."""
    return instantiate(cfg.model, vocab_size=32, n_classes=2)


def _non_embedding_params(cfg: DictConfig) -> int:
    return count_parameters(HeadlabClassifier(_model_config(cfg)), non_embedding=True)


def test_heads_sweep_keeps_the_parameter_budget_fixed():
    head_dims, counts = [], []
    for n_heads in HEADS:
        cfg = _compose("sweep=heads", f"model.n_heads={n_heads}")
        head_dims.append(cfg.model.d_model // n_heads)
        assert cfg.model.d_head is None
        counts.append(_non_embedding_params(cfg))
    assert head_dims == [64, 32, 16, 8, 4]
    assert len(set(counts)) == 1, dict(zip(HEADS, counts))


def test_heads_fixed_dhead_sweep_keeps_the_head_width_and_grows_the_budget():
    counts = []
    for n_heads in HEADS:
        cfg = _compose("sweep=heads_fixed_dhead", f"model.n_heads={n_heads}")
        assert cfg.model.d_head == 32 and cfg.model.d_model == 64
        counts.append(_non_embedding_params(cfg))
    assert counts == sorted(counts) and len(set(counts)) == len(counts)


def test_lr_sweep_pairs_constant_with_no_warmup_and_cosine_with_warmup():
    constant = _compose("sweep=lr", "optim=adamw_constant").optim
    cosine = _compose("sweep=lr", "optim=adamw").optim
    assert (constant.schedule, constant.warmup_steps, constant.warmup_ratio) == ("constant", 0, 0.0)
    assert cosine.schedule == "cosine" and cosine.warmup_steps is None and cosine.warmup_ratio > 0
    assert constant.lr == cosine.lr == 2e-3  # the grid's x1 point is the base lr


def test_init_scale_sweep_toggles_warmup_through_the_ratio():
    cfg = _compose("sweep=init_scale", "optim.warmup_ratio=0.0")
    assert cfg.optim.warmup_steps is None and cfg.optim.schedule == "cosine"


@pytest.mark.parametrize("sweep", sorted(GRIDS))
def test_every_sweep_lands_in_its_versioned_folder_named_in_one_place(sweep):
    cfg = _compose(f"sweep={sweep}")
    prefix = f"{cfg.paths.log_dir}/sweeps/{cfg.sweep_name}/"
    assert cfg.hydra.sweep.dir.startswith(prefix)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d{6}", cfg.hydra.sweep.dir.removeprefix(prefix))
    # the folder comes from conf/hydra/sweep/versioned.yaml, never from a sweep file's own copy
    own = OmegaConf.create(resources.files("headlab.conf").joinpath("sweep", f"{sweep}.yaml").read_text())
    assert OmegaConf.select(own, "hydra.sweep") is None
    assert cfg.hydra.runtime.choices["hydra/sweep"] == "versioned"


def test_the_makefile_stamp_overrides_the_versioned_folder_and_plain_multiruns_keep_theirs():
    stamped = _compose("sweep=heads", "hydra.sweep.dir=${paths.log_dir}/sweeps/${sweep_name}/STAMP")
    assert stamped.hydra.sweep.dir == f"{stamped.paths.log_dir}/sweeps/heads-synthetic/STAMP"
    plain = _compose("model.n_heads=2")
    assert plain.hydra.sweep.dir.startswith(f"{plain.paths.log_dir}/multiruns/")
