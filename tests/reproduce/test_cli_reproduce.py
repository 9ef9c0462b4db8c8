"""headlab-reproduce: the job list (dry run), a report from a sweep folder, and refusals."""

from __future__ import annotations

import pandas as pd
import pytest

from headlab.cli.reproduce import main
from tests.reproduce.test_verdicts import SPECS, heads_runs
from tests.reproduce.recorded import with_last_cpu


def test_the_quick_job_list_runs_each_sweep_once_for_all_claims_that_read_it(capsys):
    assert main(["jobs=true", f"specs={SPECS}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # C11's teacher first: a one-job zh sweep of its own since C8 and C16 moved to the LM (2026-12-04)
    assert lines[0] == "# heads-zh_reviews-teacher: C11"
    assert "headlab-train -m sweep=heads hydra/launcher=joblib " in lines[1]
    assert lines[1].endswith("experiment=sweep_zh seed=0 model.n_heads=8 trainer.max_epochs=2 data.max_len=64 "
                             "sweep_name=heads-zh_reviews-teacher figures=false")
    assert lines[2].endswith("headlab-aggregate logs/sweeps/heads-zh_reviews-teacher/reproduce")
    # C2 v4, C8 v6 and C16 v5: one LM sweep of 2, 4 and 8 heads on exploratory seeds 1900-1901
    at = lines.index("# lm-heads: C2, C8, C16")
    lm = lines[at + 1]
    assert "headlab-train -m sweep=lm_roles hydra/launcher=joblib " in lm and "hydra.sweep.dir=logs/sweeps/lm-heads/reproduce resume=auto " in lm
    assert lm.endswith("optim=adamw_constant optim.lr=0.003 model.n_heads=2,4,8 seed=1900,1901 sweep_name=lm-heads figures=false")
    assert all(line.endswith(" figures=false") for line in lines if " -m sweep=" in line)  # the quick default, every sweep
    assert lines[at + 2].endswith("headlab-aggregate logs/sweeps/lm-heads/reproduce")
    c10 = lines.index("# lm-prune: C10")  # C10 v7 on the induction LM: every job pruned, then aggregated
    assert lines[c10 + 1].endswith("optim=adamw_constant optim.lr=0.003 model.n_heads=8 seed=0,1 sweep_name=lm-prune figures=false")
    assert lines[c10 + 2] == ("  then on each completed job: "
                              "headlab-prune JOB_DIR prune.ranking=ablation prune.max_drop=0.005 prune.selection=val_half")
    # the classifier sweeps left: C11's zh teacher and C15 v4's synthetic task read from [CLS]
    assert sum("-m sweep=heads " in line for line in lines) == 2
    assert lines[lines.index("# heads-synthetic-cls: C15") + 1].endswith(
        "seed=0,1,2 model.n_heads=8 model.pooling=cls sweep_name=heads-synthetic-cls figures=false")
    # the students run after their teacher, on its job of 8 heads and seed 0
    distill = lines[lines.index("# distill-zh_reviews: C11") + 1]
    assert lines.index("# distill-zh_reviews: C11") > at
    assert distill.endswith("sweep_name=distill-zh_reviews 'teacher=<the job of heads-zh_reviews-teacher with model.n_heads=8, seed=0>' "
                            "figures=false")
    assert lines[-2].endswith("headlab-analyze-hf data=en_news threads=1 run_dir=logs/runs/reproduce/c17-minilm-en_news")
    assert lines[-1] == "# 12 sweeps, 1 runs; computed without training: C1; no evidence yet (not measured): -"
    assert lines[lines.index("# lm-roles: C3, C4, C13, C14") + 1].endswith("seed=0,1 sweep_name=lm-roles figures=false")
    assert lines[lines.index("# lm-init: C9") + 1].endswith(  # C9 v5 on the induction LM, exploratory seeds 300-301
        "optim=adamw optim.lr=0.003 optim.warmup_ratio=0.1 model.init_scale=1.0,1.5 seed=300,301 sweep_name=lm-init figures=false")
    assert not any(line.startswith(("# heads-zh_reviews:", "# lm-types:", "# init_scale-synthetic:")) for line in lines)
    assert main(["jobs=true", "scale=full", f"specs={SPECS}"]) == 0
    full = capsys.readouterr().out.splitlines()
    commands = [line for line in full if " -m sweep=" in line]
    assert len(commands) == 14 and all("hydra/launcher=slurm" in line and "figures" not in line for line in commands)
    assert [line for line in full if line.startswith("# heads")] == ["# heads-zh_reviews-teacher-full: C11",
                                                                   "# heads-synthetic-cls-full: C15"]
    assert "# lm-heads-zh-full: C8" in full and "# lm-width-zh-full: C16" in full  # two grids at the article's scale


def test_a_report_from_an_explicit_sweep_folder(tmp_path, capsys):
    sweep = tmp_path / "my_heads_sweep"
    (sweep / "aggregate").mkdir(parents=True)
    from headlab.reproduce.spec import load_spec
    from tests.reproduce.recorded import record_jobs

    record_jobs(sweep, load_spec(SPECS / "c08_heads.yaml"))
    heads_runs([0.86, 0.86, 0.87], [0.83, 0.829, 0.841]).to_csv(sweep / "aggregate" / "sweep_runs.csv", index=False)
    out = tmp_path / "report"
    args = [f"specs={SPECS}", "only=[c8,C10]", f"evidence.lm-heads={sweep}", f"out={out}",
            f"sweeps_root={tmp_path / 'none'}"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "  C8  supported" in printed and " C10  not measured" in printed
    assert list(pd.read_csv(out / "claims.csv")["verdict"]) == ["supported", "not measured"]


def test_wrong_arguments_exit_2_with_one_line(tmp_path, capsys):
    assert main([f"specs={tmp_path}"]) == 2
    assert "a folder holding claim specs" in capsys.readouterr().err
    assert main([f"specs={SPECS}", "evidence.lm-grad="]) == 2
    assert "SWEEP_NAME=DIR" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


# ---------------------------------------------------------------- a Hydra app: config, help, short forms

def _printed_config(capsys, *args: str) -> dict:
    import yaml

    assert main([*args, "--cfg", "job"]) == 0
    return yaml.safe_load(capsys.readouterr().out)


DEFAULTS = {"run": False, "jobs": False, "dry_run": False, "scale": "quick", "specs": None, "sweeps_root": None,
            "evidence": {}, "out": None, "only": [], "launcher": None, "lanes": 2, "override": [], "use_suite": None}


def test_cfg_job_prints_every_key_and_help_shows_the_forms(capsys):
    import pytest

    assert _printed_config(capsys) == DEFAULTS
    with pytest.raises(SystemExit) as exited:  # Hydra's --help exits itself
        main(["--help"])
    assert exited.value.code == 0
    printed = capsys.readouterr().out
    assert printed.startswith("headlab-reproduce: every claim of the founding article as a verdict")
    assert "headlab-reproduce jobs=true [scale=quick|cpu|full|suites]" in printed and "[evidence.NAME=DIR ...]" in printed
    assert all(f"\n{key}: " in printed for key in DEFAULTS)


def test_each_key_composes_as_written(capsys):
    printed = _printed_config(capsys, "run=true", "dry_run=true", "jobs=true", "specs='my specs'",
                              "sweeps_root=r", "out=o", "launcher=basic", "lanes=3",
                              "override=['trainer.accelerator=gpu','seed=0,1']", "only=[c8,C10]",
                              "evidence={heads-zh:/d3,heads-synthetic:/d2}", "scale=suites", "use_suite=logs/tiny-suite")
    assert printed == {"run": True, "jobs": True, "dry_run": True, "scale": "suites", "specs": "my specs",
                       "use_suite": "logs/tiny-suite",
                       "sweeps_root": "r", "out": "o", "launcher": "basic", "lanes": 3,
                       "override": ["trainer.accelerator=gpu", "seed=0,1"], "only": ["c8", "C10"],
                       "evidence": {"heads-zh": "/d3", "heads-synthetic": "/d2"}}
    assert _printed_config(capsys, "evidence.heads-zh=/d1", "evidence.heads-zh=/d3")["evidence"] == {"heads-zh": "/d3"}


def test_a_wrong_key_choice_or_value_is_one_line_exit_2(tmp_path, capsys):
    for args, expected in ((["lanse=3"], "did you mean lanes?"), (["scale=medium"], "scale='medium': expected one of quick, cpu, full"),
                           (["lanes=0"], "lanes=0: expected an integer >= 1"),
                           (["override=[gpu]"], "override='gpu': expected KEY=VALUE"),
                           ([f"specs={SPECS}", "only=[C8,C99]"], "claim ids among C1, C2")):
        assert main([*args, f"out={tmp_path / 'report'}"]) == 2, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err, (args, err)
    assert not any(tmp_path.iterdir())


def test_only_selects_claims_in_any_case_and_order_of_the_specs():
    from headlab.reproduce.command import claim_specs

    assert [s.claim for s in claim_specs(str(SPECS), ["c10,C8"])] == ["C8", "C10"]
    assert [s.claim for s in claim_specs(str(SPECS), ["C8", " c10 "])] == ["C8", "C10"]
    assert len(claim_specs(str(SPECS), [])) == len(claim_specs(None, [])) == 18


def _seeds(first: int, last: int) -> str:
    return "seed=" + ",".join(map(str, range(first, last + 1))) + " "


# make reproduce-cpu since its second ledger of 2026-12-04 (C3 v7, C5 v6 and C9 v8 sized at Holm's family; C7, C8,
# C14, C15 and C16 not run): each sweep's fresh confirmatory seeds and what it trains
CPU_SWEEPS = {
    # C11 v5's teacher: one 8-head zh job (seed 1000, max_len 128, cls), the config of C16 v4's job it was
    "heads-zh_reviews-teacher-cpu": ("seed=1000 ", "experiment=sweep_zh seed=1000 model.n_heads=8 trainer.max_epochs=2 "
                                                   "data.max_len=128 model.pooling=cls "),
    # C2 v4: the 4-head cell of the LM sweep it shared with C8 and C16 until the second ledger of 2026-12-04
    "lm-heads-cpu": (_seeds(2000, 2011), "optim=adamw_constant optim.lr=0.003 model.n_heads=4 "),
    "lm-lr-cpu-v7": (_seeds(3200, 3227), "optim=adamw_constant "),                              # C3 v7: both lrs, constant
    "lm-schedule-cpu": (_seeds(2300, 2305), "optim.lr=0.003 "),                                 # C4, C13, C14: both schedules
    "templates-synthetic-cpu-v6": (_seeds(3400, 3427), "model.template_mode=free,soft model.template=local_head1 "
                                                       "model.template_anneal_steps=0 "),
    "lm-posenc-cpu-v7": (_seeds(2500, 2507), "optim=adamw_constant optim.lr=0.003 model.pos_encoding=none,learned "),
    "lm-init-cpu-v8": (_seeds(3700, 3715), "optim=adamw optim.lr=0.003 optim.warmup_ratio=0.1 model.init_scale=1.0,1.5 "),
    "lm8-cpu-v8": (_seeds(2100, 2114), "optim=adamw_constant optim.lr=0.003 model.n_heads=8 "),   # C10 v8 and C18 v8
    "lm-data-cpu-v8": (_seeds(2800, 2805), "optim=adamw_constant optim.lr=0.003 model.n_heads=8 data.n_train=4800,96000 "),
    # C11 v5's students at the teacher's max_len 128
    "distill-zh_reviews-cpu-v5": (_seeds(1220, 1235), "distill.labels=1000 data.max_len=128 model.n_layers=2 model.n_heads=2 "),
}


def test_the_cpu_job_list_runs_the_confirmatory_seeds_and_estimates_its_wall_time(capsys, tmp_path):
    """make reproduce-cpu: every sweep on fresh seeds of its own (the specs after the second ledger of
    2026-12-04: C2 the 4-head LM cell, C10 and C18 one 8-head sweep, C4 and C13 one schedule sweep),
    C11's teacher trained first in a one-job sweep, its students after it; a wall time from the
    measured step times that fits the 2-hour budget (docs/reproduce.md). No shipped spec has a look 2
    since C14 v7: a copy of the specs with C14 given one prints it after look 1, on fresh seeds only."""
    import re
    import shutil

    import yaml

    from headlab.reproduce.estimate import CPU_SECONDS, DERIVED_SECONDS

    assert main(["jobs=true", "scale=cpu", f"specs={SPECS}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not any(line.startswith("# look 2") for line in lines)
    sweeps = [line for line in lines if " -m sweep=" in line]
    names = [re.search(r" sweep_name=(\S+) ", line).group(1) for line in sweeps]
    assert sorted(names) == sorted(CPU_SWEEPS) and len(sweeps) == 10
    for name, line in zip(names, sweeps):
        seeds, settings = CPU_SWEEPS[name]
        assert seeds in line and settings in line, name
        assert line.endswith(f"sweep_name={name} figures=false") or \
            (name.startswith("distill") and line.endswith("'teacher=<the job of heads-zh_reviews-teacher-cpu with "
                                                          "model.n_heads=8, seed=1000>' figures=false"))
        assert [other for other in names if seeds in sweeps[names.index(other)]] == [name]  # no seed in two sweeps
    assert names[0] == "heads-zh_reviews-teacher-cpu" and names[-1] == "distill-zh_reviews-cpu-v5"
    assert sum("-m sweep=heads " in line for line in sweeps) == 1 and "headlab-distill -m sweep=distill " in sweeps[-1]
    lm8 = lines.index("# lm8-cpu-v8: C10, C18")   # both per-job steps on the one 8-head sweep, then the aggregate
    assert lines[lm8 + 2].startswith("  then on each completed job: headlab-prune JOB_DIR ")
    assert lines[lm8 + 3] == "  then on each completed job: headlab-importance JOB_DIR importance.curves=false"
    for gone in ("heads-zh_reviews-cpu-v4", "heads-zh_reviews-cpu-c8v5", "lm-roles-cpu", "lm-roles-rep", "lm-types-cpu",
                 "lm-prune-cpu-v7", "lm-grad-cpu-v7", "lm-data-cpu-v7", "lm-init-cpu-v6", "lm-posenc-cpu-v6",
                 "lm-lr-cpu-v6", "templates-synthetic-cpu-v5", "lm-init-cpu-v7", "domains-multidomain-cpu-v5",
                 "heads-synthetic-cls-cpu-v4"):
        assert not any(f"sweep_name={gone} " in line for line in lines), gone

    estimate = lines[-1]
    assert estimate.startswith("# estimated wall time on 2 cores with 2 lanes: ")
    minutes = float(re.search(r"lanes: (\d+) min", estimate).group(1))
    # every step of the plan has a measured or derived time; two lanes cannot beat half their sum, nor
    # the student's wait for its teacher; greedy lanes add at most that chain to half the sum
    seconds = {name: {**CPU_SECONDS, **DERIVED_SECONDS}[name] for name in [*names, "c17-minilm-en_news-cpu"]}
    chain = seconds["heads-zh_reviews-teacher-cpu"] + seconds["distill-zh_reviews-cpu-v5"]
    assert sum(seconds.values()) / 2 / 60 - 1 <= minutes <= (sum(seconds.values()) / 2 + chain) / 60
    assert minutes >= chain / 60 - 1 and minutes <= 120  # the 2-hour budget

    # look 2: C14 given version 6's (a sweep of its own on 16 fresh seeds, the config its primary reads), and
    # its last cpu sweep back as look 1
    specs = tmp_path / "specs"
    shutil.copytree(SPECS, specs)
    data = yaml.safe_load(with_last_cpu("c14_seeds.yaml", (specs / "c14_seeds.yaml").read_text(encoding="utf-8")))
    fresh = list(range(2306, 2322))
    data["evidence"]["replication"] = {"sweep_name": "lm-roles-rep", "overrides": [
        "seed=" + ",".join(map(str, fresh)), "optim=adamw_constant", "optim.lr=3e-3"]}
    data["seeds"].update(replication=fresh, alpha=[0.0125, 0.0125])
    (specs / "c14_seeds.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    assert main(["jobs=true", "scale=cpu", f"specs={specs}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines.index("# look 2, only for the claims look 1 leaves inconclusive: fresh seeds, read on their own")
    assert [line for line in lines[:header] if " -m sweep=" in line] == sweeps   # look 1 as before
    second = [line for line in lines[header:] if " -m sweep=" in line]
    assert [re.search(r"sweep_name=(\S+)", line).group(1) for line in second] == ["lm-roles-rep"]   # C14's only
    assert "seed=" + ",".join(map(str, fresh)) + " optim=adamw_constant optim.lr=3e-3 " in second[0]
    with_look2 = lines[-1]
    assert with_look2.startswith("# estimated wall time on 2 cores with 2 lanes, look 2 included: ")
    assert float(re.search(r"included: (\d+) min", with_look2).group(1)) >= minutes


def test_an_evidence_name_no_chosen_claim_reads_is_refused_naming_the_known_ones(tmp_path, capsys):
    (tmp_path / "sweep").mkdir()
    assert main([f"specs={SPECS}", "only=[c8]", f"evidence.heads={tmp_path / 'sweep'}",
                 f"out={tmp_path / 'report'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"headlab-reproduce: error: invalid config evidence.heads='{tmp_path / 'sweep'}': expected a sweep "
                   "name the chosen claims read at this scale: lm-heads"]
    assert not (tmp_path / "report").exists()


def test_a_report_of_some_claims_gets_its_own_default_folder_beside_the_days_ledger(tmp_path, monkeypatch, capsys):
    """Two `only=` reports of one day (no out=) land in two folders named by their claims: the second
    never overwrites the first, nor the day's full ledger in reports/<today>."""
    import datetime as dt

    monkeypatch.chdir(tmp_path)
    today = dt.date.today().isoformat()
    for only in ("[C1]", "[c17,C1]"):
        main([f"specs={SPECS}", f"only={only}", f"sweeps_root={tmp_path / 'none'}"])
    out = capsys.readouterr().out
    assert f"wrote reports/{today}-C1/claims.csv" in out and f"wrote reports/{today}-C1-C17/claims.csv" in out
    first = pd.read_csv(tmp_path / "reports" / f"{today}-C1" / "claims.csv")
    assert list(first["claim"]) == ["C1"]
    assert sorted(pd.read_csv(tmp_path / "reports" / f"{today}-C1-C17" / "claims.csv")["claim"]) == ["C1", "C17"]
    assert not (tmp_path / "reports" / today).exists()
