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
    # C16 given C8's full folder: the same LM, but 2 and 8 heads x 64 where C8 runs 4 and 8 heads x 256
    text = (SPECS / "c16_head_width.yaml").read_text(encoding="utf-8").replace("lm-width-zh-full", "lm-heads-zh-full")
    (tmp_path / "c16_head_width.yaml").write_text(text, encoding="utf-8")
    specs = [load_spec(SPECS / "c08_heads.yaml"), load_spec(tmp_path / "c16_head_width.yaml")]
    with pytest.raises(ConfigError, match=r"C16: evidence\.full='lm-heads-zh-full'.*a sweep_name of its own: "
                                          r"C8 runs headlab-train lm_roles experiment=induction_zh .*model\.n_heads=4,8"):
        sweep_jobs(specs, "full")
    assert [j.claims for j in sweep_jobs(specs, "quick") if j.sweep_name == "lm-heads"] == [("C8", "C16")]  # one grid: shared


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
    # C16's full sweep given the name of its (and C8's) quick one
    for name in ("c08_heads.yaml", "c16_head_width.yaml"):
        text = (SPECS / name).read_text(encoding="utf-8").replace("lm-width-zh-full", "lm-heads")
        (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"c16_head_width\.yaml: evidence\.full='lm-heads'.*apart from the quick scale's"):
        load_specs(tmp_path)


# ---------------------------------------------------------------- a teacher trained by a sweep of its own

C11_TEACHER = "heads-zh_reviews-teacher-cpu"   # C11 v5's teacher at the cpu scale: one 8-head zh job of seed 1000


def _c11_data() -> dict:
    """conf/reproduce/c11_distillation.yaml as plain YAML (read apart from load_spec)."""
    import yaml

    return yaml.safe_load((SPECS / "c11_distillation.yaml").read_text(encoding="utf-8"))


def _spec_file(data: dict, path) -> object:
    import yaml

    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def test_the_cpu_plan_trains_c11s_teacher_in_one_job_of_its_own_before_the_students():
    jobs = sweep_jobs(SPEC_LIST, "cpu")
    names = [j.sweep_name for j in jobs]
    assert names.count(C11_TEACHER) == 1
    teacher = jobs[names.index(C11_TEACHER)]
    wanted = _c11_data()["evidence"]["cpu"]["teacher"]
    assert wanted["sweep_name"] == C11_TEACHER
    assert (teacher.sweep, teacher.overrides, teacher.claims, teacher.program, teacher.teacher, teacher.per_job) == \
        ("heads", tuple(wanted["overrides"]), ("C11",), "headlab-train", None, ())
    student = jobs[names.index("distill-zh_reviews-cpu-v5")]
    assert student.teacher == (C11_TEACHER, (("model.n_heads", 8), ("seed", 1000)))
    assert names.index(C11_TEACHER) < names.index(student.sweep_name)
    grid = _grid(teacher.sweep, (*teacher.overrides, f"sweep_name={teacher.sweep_name}"))
    assert len(grid) == 1  # the sweep file's axes (seeds, head counts) replaced by one value each
    GlobalHydra.instance().clear()
    with initialize_config_module("headlab.conf", version_base="1.3"):
        cfg = compose("train", overrides=[f"{k}={v}" for k, v in grid[0].items()])
    validate_config(cfg)
    assert (cfg.model.n_heads, cfg.seed, cfg.data.max_len, cfg.model.pooling) == (8, 1000, 128, "cls")
    assert cfg.data.source == "zh_reviews" and cfg.sweep_name == C11_TEACHER
    # the one job is the job the students' `where` names
    from omegaconf import OmegaConf

    assert all(_same(OmegaConf.select(cfg, key), value) for key, value in student.teacher[1])


def test_a_teacher_another_claims_sweep_holds_or_a_left_out_claim_ran_is_not_trained_again(tmp_path):
    c11 = load_spec(SPECS / "c11_distillation.yaml")
    # C15 given a zh heads sweep under the teacher's folder name, holding the teacher's job among others
    import yaml

    data = yaml.safe_load((SPECS / "c15_punctuation.yaml").read_text(encoding="utf-8"))
    held = ["experiment=sweep_zh", "seed=1000,1001", "model.n_heads=4,8", "trainer.max_epochs=2", "data.max_len=128",
            "model.pooling=cls"]
    data["evidence"]["cpu"] = {"sweep_name": C11_TEACHER, "overrides": held}
    c15 = load_spec(_spec_file(data, tmp_path / "c15_punctuation.yaml"))
    jobs = sweep_jobs([c11, c15], "cpu")
    assert [(j.sweep_name, j.claims) for j in jobs] == [(C11_TEACHER, ("C15",)), ("distill-zh_reviews-cpu-v5", ("C11",))]
    assert jobs[0].overrides == tuple(held)   # the claim's sweep, not the one-job teacher sweep
    # `only=C11` after a run that trained the teacher: read from its folder, not planned
    assert [j.sweep_name for j in sweep_jobs([c11], "cpu", elsewhere=frozenset({C11_TEACHER}))] == ["distill-zh_reviews-cpu-v5"]


@pytest.mark.parametrize("held, sweep, refused", [
    # the claim's sweep trains the teacher at max_len 64, the teacher's overrides say 128
    (["experiment=sweep_zh", "seed=1000,1001", "model.n_heads=4,8", "trainer.max_epochs=2", "data.max_len=64"], "heads",
     "evidence.cpu.teacher.overrides='data.max_len=128': expected data.max_len=64, as C15's sweep "),
    # its seeds leave out the teacher's seed 1000
    (["experiment=sweep_zh", "seed=1001,1002", "model.n_heads=8", "data.max_len=128"], "heads",
     "evidence.cpu.teacher.overrides='seed=1000': expected seed=1001,1002, as C15's sweep "),
    # another sweep file
    (["experiment=sweep_zh", "seed=1000", "model.n_heads=8"], "templates",
     "evidence.cpu.teacher.sweep='heads': expected templates, the sweep file of C15's sweep "),
])
def test_a_teacher_another_claims_sweep_trains_otherwise_than_its_spec_says_is_refused(tmp_path, held, sweep, refused):
    import yaml

    c11 = load_spec(SPECS / "c11_distillation.yaml")
    data = yaml.safe_load((SPECS / "c15_punctuation.yaml").read_text(encoding="utf-8"))
    data["evidence"]["cpu"] = {"sweep_name": C11_TEACHER, "overrides": held}
    data["evidence"]["sweep"] = sweep
    c15 = load_spec(_spec_file(data, tmp_path / "c15_punctuation.yaml"))
    with pytest.raises(ConfigError) as error:
        sweep_jobs([c11, c15], "cpu")
    assert str(error.value).startswith(f"invalid config C11: {refused.split(': expected')[0]}") and refused in str(error.value)
    assert len(str(error.value).splitlines()) == 1


def test_two_specs_training_one_teacher_folder_differently_are_refused(tmp_path):
    data = _c11_data()
    data["claim"] = "C19"
    data["evidence"]["cpu"]["sweep_name"] = "distill-zh_reviews-cpu-c19"   # students of their own
    same = load_spec(_spec_file(data, tmp_path / "c19_same.yaml"))
    c11 = load_spec(SPECS / "c11_distillation.yaml")
    # trained the same way: one teacher sweep, listed under both claims
    jobs = sweep_jobs([c11, same], "cpu")
    assert [(j.sweep_name, j.claims) for j in jobs if j.sweep_name == C11_TEACHER] == [(C11_TEACHER, ("C11", "C19"))]
    teacher = data["evidence"]["cpu"]["teacher"]
    teacher["overrides"] = [o.replace("trainer.max_epochs=2", "trainer.max_epochs=3") for o in teacher["overrides"]]
    other = load_spec(_spec_file(data, tmp_path / "c19_other.yaml"))
    with pytest.raises(ConfigError, match=r"C19: evidence\.cpu\.teacher='heads-zh_reviews-teacher-cpu': expected a "
                                          r"sweep_name of its own: C11 trains heads experiment=sweep_zh seed=1000 "
                                          r"model\.n_heads=8 trainer\.max_epochs=2 data\.max_len=128 model\.pooling=cls under it"):
        sweep_jobs([c11, other], "cpu")


@pytest.mark.parametrize("dropped", ["overrides", "sweep"])
def test_a_teacher_with_its_sweep_file_but_no_overrides_or_the_reverse_is_one_line(tmp_path, dropped):
    data = _c11_data()
    del data["evidence"]["cpu"]["teacher"][dropped]
    path = _spec_file(data, tmp_path / "c11_distillation.yaml")
    with pytest.raises(ConfigError) as refused:
        load_spec(path)
    text = str(refused.value)
    assert "\n" not in text
    assert text.startswith("invalid config c11_distillation.yaml: evidence.cpu.teacher.sweep=" +
                           ("'heads'" if dropped == "overrides" else "None"))
    assert text.endswith("expected a sweep file and its overrides together (how to train the teacher), or neither")


# ---------------------------------------------------------------- the order the lanes take the plan in

def test_the_lanes_take_teachers_first_then_their_students_then_the_rest(tmp_path):
    """A runner that records each step as a lane starts it; two steps of one kind (teacher, student,
    other) wait for each other, so with two lanes the record is in phases only if each phase is taken
    whole before the next (the queue of the plan before 2026-12-04 put a free lane on `a` beside a student)."""
    import threading

    from headlab.reproduce.jobs import RunJob, SweepJob
    from headlab.reproduce.runner import Runner, run_plan

    started: list[str] = []
    kinds = {"t1": "teacher", "t2": "teacher", "s1": "student", "s2": "student", "a": "other", "b": "other"}
    together = {kind: threading.Barrier(2, timeout=5) for kind in set(kinds.values())}

    class Recording(Runner):
        def run_sweep(self, job):
            started.append(job.sweep_name)
            try:
                together[kinds[job.sweep_name]].wait()
            except threading.BrokenBarrierError:
                pass  # not taken beside its kind's other step: `started` shows what was

        def run_one(self, job):
            started.append(job.run_name)

    def sweep(name, teacher=None):
        return SweepJob("heads", name, (), ("C1",), "headlab-distill" if teacher else "headlab-train",
                        (teacher, (("seed", 0),)) if teacher else None)

    # a hand-made plan listing students and other sweeps before the teachers
    plan = [sweep("a"), sweep("s1", "t1"), sweep("b"), sweep("s2", "t2"), sweep("t2"), sweep("t1")]
    runner = Recording(tmp_path / "sweeps", tmp_path / "runs", "cpu", "joblib", lanes=2, say=lambda _: None)
    assert run_plan(runner, plan, [RunJob("headlab-analyze-hf", "r", (), ("C17",))]) == {}
    assert len(started) == 7
    assert [set(started[:2]), set(started[2:4]), set(started[4:6]), started[6]] == [{"t1", "t2"}, {"s1", "s2"}, {"a", "b"}, "r"]


def test_the_estimate_packs_a_student_right_after_its_teacher():
    from types import SimpleNamespace as J

    from headlab.reproduce.estimate import StepEstimate, wall_seconds

    # sweep_jobs' order: the sweeps that wait for nothing, then the student
    sweeps = [J(sweep_name="t", teacher=None), J(sweep_name="a", teacher=None), J(sweep_name="b", teacher=None),
              J(sweep_name="s", teacher=("t", ()))]
    steps = [StepEstimate(name, seconds, "") for name, seconds in (("t", 50), ("a", 100), ("b", 100), ("s", 150))]
    # lane 1: t 0-50, s 50-200; lane 2: a 0-100, b 100-200: 200 s, the 400 s of work over two lanes.
    # (a queue of t, a, b, s would give lane 1 t 0-50, b 50-150 and lane 2 a 0-100, s 100-250: 250 s)
    assert wall_seconds(steps, sweeps, 2) == 200.0
    assert wall_seconds(steps, sweeps, 1) == 400.0
