"""headlab-reproduce: the job list (dry run), a report from a sweep folder, and refusals."""

from __future__ import annotations

import pandas as pd
import pytest

from headlab.cli.reproduce import main
from tests.reproduce.test_verdicts import SPECS, heads_runs


def test_the_quick_job_list_runs_each_sweep_once_for_all_claims_that_read_it(capsys):
    assert main(["jobs=true", f"specs={SPECS}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("# heads-zh_reviews: C8, C16")
    zh = lines[at + 1]
    assert zh.startswith(".venv/bin/headlab-train -m sweep=heads hydra/launcher=joblib hydra.launcher.n_jobs=2 "
                         "hydra.sweep.dir=logs/sweeps/heads-zh_reviews/reproduce resume=auto experiment=sweep_zh seed=0,1,2 "
                         "model.n_heads=4,8,16") or "headlab-train -m sweep=heads" in zh
    assert zh.endswith("sweep_name=heads-zh_reviews figures=false")  # the quick default
    assert all(line.endswith(" figures=false") for line in lines if " -m sweep=" in line)  # the LM sweep too
    assert lines[at + 2].endswith("headlab-aggregate logs/sweeps/heads-zh_reviews/reproduce")
    c10 = lines.index("# lm-prune: C10")  # C10 v7 on the induction LM: every job pruned, then aggregated
    assert lines[c10 + 1].endswith("optim=adamw_constant optim.lr=0.003 model.n_heads=8 seed=0,1 sweep_name=lm-prune figures=false")
    assert lines[c10 + 2] == ("  then on each completed job: "
                              "headlab-prune JOB_DIR prune.ranking=ablation prune.max_drop=0.005 prune.selection=val_half")
    # zh_reviews and C15 v4's synthetic task read from [CLS] (C18 reads the LM since version 7)
    assert sum("-m sweep=heads " in line for line in lines) == 2
    assert lines[lines.index("# heads-synthetic-cls: C15") + 1].endswith(
        "seed=0,1,2 model.n_heads=8 model.pooling=cls sweep_name=heads-synthetic-cls figures=false")
    assert lines[-2].endswith("headlab-analyze-hf data=en_news threads=1 run_dir=logs/runs/reproduce/c17-minilm-en_news")
    assert lines[-1].startswith("# 12 sweeps, 1 runs; computed without training: C1; no evidence yet (not measured): ")
    assert lines[lines.index("# lm-types: C2") + 1].endswith(  # C2 v3 on the induction LM, exploratory seeds 400-401
        "optim=adamw_constant optim.lr=0.003 seed=400,401 sweep_name=lm-types figures=false")
    assert lines[lines.index("# lm-init: C9") + 1].endswith(  # C9 v5 on the induction LM, exploratory seeds 300-301
        "optim=adamw optim.lr=0.003 optim.warmup_ratio=0.1 model.init_scale=1.0,1.5 seed=300,301 sweep_name=lm-init figures=false")
    assert "# init_scale-synthetic: C9" not in lines
    assert main(["jobs=true", "scale=full", f"specs={SPECS}"]) == 0
    full = capsys.readouterr().out.splitlines()
    commands = [line for line in full if " -m sweep=" in line]
    assert len(commands) == 13 and all("hydra/launcher=slurm" in line and "figures" not in line for line in commands)
    assert [line for line in full if line.startswith("# heads")] == ["# heads-zh_reviews-full: C8", "# heads-synthetic-cls-full: C15",
                                                                   "# heads_width-zh_reviews-full: C16"]


def test_a_report_from_an_explicit_sweep_folder(tmp_path, capsys):
    sweep = tmp_path / "my_heads_sweep"
    (sweep / "aggregate").mkdir(parents=True)
    from headlab.reproduce.spec import load_spec
    from tests.reproduce.recorded import record_jobs

    record_jobs(sweep, load_spec(SPECS / "c08_heads.yaml"))
    heads_runs([0.86, 0.86, 0.87], [0.83, 0.829, 0.841]).to_csv(sweep / "aggregate" / "sweep_runs.csv", index=False)
    out = tmp_path / "report"
    args = [f"specs={SPECS}", "only=[c8,C10]", f"evidence.heads-zh_reviews={sweep}", f"out={out}",
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


def test_the_cpu_job_list_runs_the_confirmatory_seeds_and_estimates_its_wall_time(capsys):
    """make reproduce-cpu: seeds 10-17 (10-19 on the heads synthetic sweep, run first; C6 v6 on the LM
    on fresh seeds 1400-1409; the LM sweep of C3, C4, C13, C14 on 300-307, C2 v3 on 410-419, C9 v5 on 520-524; C18 v7 on the LM on 1600-1623;
    C5 v4 on 700-715, C12 v6 on 800-811, C10 v7 on the LM on 1500-1515), zh reviews at max_len 128 with cls pooling, a
    wall time from the 2026-12-02 run's measured step times, look 2 included; look 2: fresh seeds only. Since C8 v5
    (48 zh jobs) the estimate is over the 2-hour budget, and it says so rather than hiding it (docs/reproduce.md)."""
    import re

    assert main(["jobs=true", "scale=cpu", f"specs={SPECS}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines.index("# look 2, only for the claims look 1 leaves inconclusive: fresh seeds, read on their own")
    sweeps = [line for line in lines[:header] if " -m sweep=" in line]
    ten, eight, fresh = "seed=" + ",".join(map(str, range(1600, 1624))) + " ", "seed=10,11,12,13,14,15,16,17 ", "seed=" + ",".join(map(str, range(1400, 1410))) + " "
    assert len(sweeps) == 14
    # C8 v4 and C16 v4: one zh sweep on fresh seeds 1000-1007; C3 v5: the constant-lr arms on fresh seeds 1100-1127
    zh4, c3 = ("seed=" + ",".join(map(str, r)) + " " for r in (range(1000, 1008), range(1100, 1128)))
    assert [line for line in sweeps if zh4 in line] == [line for line in sweeps if "sweep_name=heads-zh_reviews-cpu-v4 " in line]
    assert "model.n_heads=4,8,16 " in next(line for line in sweeps if zh4 in line)
    # C8 v5: its own 4/8-head zh sweep on 24 fresh seeds 1420-1443
    c8 = "seed=" + ",".join(map(str, range(1420, 1444))) + " "
    assert [line for line in sweeps if c8 in line] == [line for line in sweeps if "sweep_name=heads-zh_reviews-cpu-c8v5 " in line]
    assert "model.n_heads=4,8 " in next(line for line in sweeps if c8 in line)
    assert [line for line in sweeps if c3 in line] == [line for line in sweeps if "sweep_name=lm-roles-c3-cpu-v5 " in line]
    assert "optim=adamw_constant " in next(line for line in sweeps if c3 in line)
    # C11 v5: students on fresh seeds 1220-1235 at the teacher's max_len 128, taught by the 8-head job of seed 1000 of C8/C16's sweep
    c11 = "seed=" + ",".join(map(str, range(1220, 1236))) + " "
    assert [line for line in sweeps if c11 in line] == [line for line in sweeps if "sweep_name=distill-zh_reviews-cpu-v5 " in line]
    assert "data.max_len=128 " in next(line for line in sweeps if c11 in line)
    types = "seed=" + ",".join(map(str, range(410, 420))) + " "  # C2 v3 on the LM: fresh seeds 410-419
    assert [line for line in sweeps if types in line] == [line for line in sweeps if "sweep_name=lm-types-cpu" in line]
    # C18 v7: the LM with 8 heads a layer, fresh seeds 1600-1623
    assert [line for line in sweeps if ten in line] == [line for line in sweeps if "sweep_name=lm-grad-cpu-v7 " in line]
    assert "optim=adamw_constant optim.lr=0.003 model.n_heads=8 " in next(line for line in sweeps if ten in line)
    init = "seed=" + ",".join(map(str, range(560, 572))) + " "  # C9 v6 on the LM: fresh seeds 560-571, both gains, 10 % warm-up
    assert [line for line in sweeps if init in line] == [line for line in sweeps if "sweep_name=lm-init-cpu-v6" in line]
    assert "optim=adamw optim.lr=0.003 optim.warmup_ratio=0.1 model.init_scale=1.0,1.5 " in next(line for line in sweeps if init in line)
    # C6 v6 on the LM: learned positions against none, fresh seeds 1400-1409
    assert [line for line in sweeps if fresh in line] == [line for line in sweeps if "sweep_name=lm-posenc-cpu-v6 " in line]
    assert "model.pos_encoding=none,learned " in next(line for line in sweeps if fresh in line)
    lm = "seed=" + ",".join(map(str, range(300, 308))) + " "   # the roles claims moved to the LM: fresh seeds 300-307
    assert [line for line in sweeps if lm in line] == [line for line in sweeps if "sweep_name=lm-roles-cpu" in line]
    # issue 31 item 6: C5 v4 (one soft-templated head per layer), C12 v7 (the LM, equal steps), C10 v7 (the LM, 16 seeds, 8 heads)
    c5, c10 = ("seed=" + ",".join(map(str, r)) + " " for r in (range(700, 716), range(1500, 1516)))
    c12 = "seed=" + ",".join(map(str, range(1800, 1812)))  # the last override of its line
    assert [line for line in sweeps if c5 in line] == [line for line in sweeps if "sweep_name=templates-synthetic-cpu-v4" in line]
    assert "model.template_mode=free,soft model.template=local_head1 model.template_anneal_steps=0 " in \
        next(line for line in sweeps if c5 in line)
    assert [line for line in sweeps if c12 in line] == [line for line in sweeps if "sweep_name=lm-data-cpu-v7 " in line]
    assert "optim=adamw_constant optim.lr=0.003 model.n_heads=8 data.n_train=4800,96000 " in next(line for line in sweeps if c12 in line)
    assert [line for line in sweeps if c10 in line] == [line for line in sweeps if "sweep_name=lm-prune-cpu-v7 " in line]
    assert "optim=adamw_constant optim.lr=0.003 model.n_heads=8 " in next(line for line in sweeps if c10 in line)
    # C7 v4: split by domain against a shared model twice as wide, fresh seeds 1300-1315
    c7 = "seed=" + ",".join(map(str, range(1300, 1316))) + " "
    assert [line for line in sweeps if c7 in line] == [line for line in sweeps if "sweep_name=domains-multidomain-cpu-v4 " in line]
    assert "model.domain_split_layers=0,2 model.d_head=16,32 " in next(line for line in sweeps if c7 in line)
    # C15 v4: the synthetic task, whose final mark decides part of the label, 8 heads read from [CLS], fresh seeds 1700-1723
    c15 = "seed=" + ",".join(map(str, range(1700, 1724))) + " "
    assert [line for line in sweeps if c15 in line] == [line for line in sweeps if "sweep_name=heads-synthetic-cls-cpu-v4 " in line]
    assert next(line for line in sweeps if c15 in line).endswith(c15 + "model.n_heads=8 model.pooling=cls "
                                                                 "sweep_name=heads-synthetic-cls-cpu-v4 figures=false")
    assert all(eight in line for line in sweeps if not any(seeds in line for seeds in (ten, fresh, lm, types, init, c5, c12, c10, zh4, c3, c11, c7, c8, c15)))
    assert not any("sweep_name=heads-zh_reviews-cpu " in line for line in sweeps)  # C15 up to v3's zh sweep left the plan
    for name in ("heads-zh_reviews-cpu-v4", "heads-zh_reviews-cpu-c8v5"):
        zh = next(line for line in sweeps if f"sweep_name={name} " in line)
        assert "data.max_len=128" in zh and "model.pooling=cls" in zh
    second = [line for line in lines[header:] if " -m sweep=" in line]
    assert [re.search(r"sweep_name=(\S+)", line).group(1) for line in second] == ["lm-roles-rep"]   # C14's only
    assert "seed=" + ",".join(map(str, range(308, 324))) + " " in second[0]
    assert "optim=adamw_constant optim.lr=3e-3 " in second[0]
    from headlab.reproduce.estimate import CPU_SECONDS, DERIVED_SECONDS

    estimate = lines[-1]
    assert estimate.startswith("# estimated wall time on 2 cores with 2 lanes, look 2 included")
    minutes = float(re.search(r"included: (\d+) min", estimate).group(1))
    # every measured step over two lanes is a lower bound, and the zh lane (heads then its distill
    # students) cannot be split; C8 v5's 48 zh jobs are one lane's work on their own
    c8_minutes = float(re.search(r"heads-zh_reviews-cpu-c8v5 (\d+) min", estimate).group(1))
    assert c8_minutes == round(DERIVED_SECONDS["heads-zh_reviews-cpu-c8v5"] / 60) and c8_minutes > 120
    assert minutes >= sum(CPU_SECONDS.values()) / 2 / 60 - 1
    assert minutes >= max(c8_minutes, (DERIVED_SECONDS["heads-zh_reviews-cpu-v4"] + DERIVED_SECONDS["distill-zh_reviews-cpu-v5"]) / 60) - 1
    assert minutes <= (sum(CPU_SECONDS.values()) + sum(DERIVED_SECONDS.values())) / 60 / 2 + c8_minutes  # no lane idles for long


def test_an_evidence_name_no_chosen_claim_reads_is_refused_naming_the_known_ones(tmp_path, capsys):
    (tmp_path / "sweep").mkdir()
    assert main([f"specs={SPECS}", "only=[c8]", f"evidence.heads={tmp_path / 'sweep'}",
                 f"out={tmp_path / 'report'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"headlab-reproduce: error: invalid config evidence.heads='{tmp_path / 'sweep'}': expected a sweep "
                   "name the chosen claims read at this scale: heads-zh_reviews"]
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
