"""The founding article's closing advice as checks over one run's tables (pure: no files, no torch).

Each check reads `RunTables` (summary.json, the resolved config, head_metrics, head_pairs, the
importance report) and returns a `Finding`: a status (ok / warn / fail / not measured, with the
reason), the numbers it read and the override to try. Thresholds live in `Thresholds`, each with
the measurement that placed it (docs/reproduce.md#doctor).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from headlab.analysis.bifurcation import role_bifurcation_steps
from headlab.analysis.redundancy import pair_table_redundancy
from headlab.analysis.roles import ROLES
from headlab.measure import TASK  # `role@task`: the role from the queries that feed the decision
from headlab.store.run_dir import IMPORTANCE_REPORT, SUMMARY

OK, WARN, FAIL, NOT_MEASURED = "ok", "warn", "fail", "not measured"
STATUSES = (OK, WARN, FAIL, NOT_MEASURED)
# Roles a freshly initialised head gets (no specialisation yet): a head still in one of these at
# the end, and in the same one as at step 0, never left its init role.
UNSPECIALISED_ROLES = ("broad", "mixed")


@dataclass(frozen=True)
class Thresholds:
    """Where a check turns from ok to warn (and fail). Measured on the sweep_synthetic model
    (2 x 4 heads, d_model 64, 40 tokens): step-0 within-layer JS 0.33 nats at init_scale 1.0,
    0.0024 at 0.25 and 0.0001 at 0.1 (mean entropy_norm 0.72, 0.999, 1.000)."""

    init_js_warn: float = 0.01          # nats: heads start practically alike below this
    init_js_fail: float = 0.001
    warmup_min_ratio: float = 0.02      # of all steps, for an Adam-family lr >= warmup_lr
    warmup_lr: float = 1e-3
    min_head_dim: int = 32              # article 5.1: below 32 hurts
    redundancy_mass: float = 0.1        # two heads within 10 % attention mass are duplicates
    redundant_frac_warn: float = 0.25   # warn above: article 5.2 finds 20-30 % prunable
    late_fraction: float = 0.2          # "the end": the last 20 % of the measured steps
    unstable_frac_warn: float = 0.25
    stuck_frac_warn: float = 0.25


@dataclass
class RunTables:
    """What the checks read from one run. Tables may be None (file missing or unreadable)."""

    summary: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)
    head_metrics: pd.DataFrame | None = None
    head_pairs: pd.DataFrame | None = None
    importance: dict[str, Any] | None = None
    unreadable: list[str] = field(default_factory=list)  # files present but corrupt: "<file>: <why>"
    # parts holding NaN / inf values, "<table>/<part>: N of M values (metric k, ...)": their rows are left out
    # of the tables above, so every other check reads finite values only and this list says what was left out
    nonfinite: list[str] = field(default_factory=list)

    def setting(self, key: str) -> Any:
        """A dotted config key: the summary's `swept` value first, then the resolved config."""
        swept = self.summary.get("swept", {})
        if key in swept:
            return swept[key]
        node: Any = self.config
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node


@dataclass
class Finding:
    """One check's verdict: `evidence` holds the numbers it read, `override` what to try."""

    check: str
    status: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    override: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status, "message": self.message,
                "evidence": self.evidence, "override": self.override}


def _not_measured(check: str, reason: str) -> Finding:
    return Finding(check, NOT_MEASURED, reason)


def _metric(tables: RunTables, metric: str) -> pd.DataFrame:
    m = tables.head_metrics
    if m is None or m.empty:
        return pd.DataFrame(columns=["step", "layer", "head", "value"])
    return m.loc[m["metric"] == metric, ["step", "layer", "head", "value"]]


def _roles(tables: RunTables) -> tuple[pd.DataFrame, str]:
    """(role rows, which role): the task role (`role@task`, from the queries that feed the decision) when
    the run measured it, as headlab-report reads it, else the all-query `role`. A head that reads the
    decisive token from [CLS] stays `mixed` over all queries; judged by that, it never specialised."""
    task = _metric(tables, f"role@{TASK}")
    return (task, "task role") if not task.empty else (_metric(tables, "role"), "role")


def _pairs(tables: RunTables, metric: str) -> pd.DataFrame:
    p = tables.head_pairs
    if p is None or p.empty:
        return pd.DataFrame(columns=["step", "layer", "head_a", "head_b", "value"])
    return p.loc[(p["metric"] == metric) & (p["head_a"] < p["head_b"]), ["step", "layer", "head_a", "head_b", "value"]]


# ---------------------------------------------------------------- the checks
def check_run_status(tables: RunTables, t: Thresholds) -> Finding:
    """A diverged, failed or unfinished run, or a NaN loss in a completed one."""
    name, s = "run_status", tables.summary
    status = str(s.get("status", "unknown"))
    evidence = {"status": status, "error": s.get("error"), "diverged_step": s.get("diverged_step"),
                "val_loss": s.get("val_loss"), "global_step": s.get("global_step")}
    lr = tables.setting("optim.lr")
    lower = f"optim.lr={_fmt(lr / 3)}" if isinstance(lr, (int, float)) else "a lower optim.lr"
    if status == "diverged":
        return Finding(name, FAIL, f"the run diverged at step {s.get('diverged_step')}", evidence,
                       f"{lower} trainer.gradient_clip_val=1.0")
    if status == "failed":
        return Finding(name, FAIL, f"the run failed: {s.get('error')}", evidence, "fix the error above, then resume=true")
    if status in ("running", "interrupted"):
        return Finding(name, WARN, f"the run is {status} (not finished)", evidence, "resume=true")
    if status != "completed":
        return Finding(name, FAIL, f"unknown run status {status!r}", evidence)
    loss = s.get("val_loss")
    if loss is not None and not (isinstance(loss, (int, float)) and math.isfinite(loss)):
        return Finding(name, FAIL, f"completed with a non-finite validation loss ({loss})", evidence, lower)
    return Finding(name, OK, "completed" + (", finite validation loss" if loss is not None else ""), evidence)


def check_init_variance(tables: RunTables, t: Thresholds) -> Finding:
    """Heads that start alike (near-uniform attention at step 0) break symmetry late (article 2.1/5.1)."""
    name = "init_variance"
    js = _pairs(tables, "js")
    entropy = _metric(tables, "entropy_norm")
    if js.empty or entropy.empty:
        return _not_measured(name, "no step-0 js pairs / entropy_norm in the run's tables (single-head layers or no measurement)")
    first = min(js["step"].min(), entropy["step"].min())
    if tables.summary.get("kind") == "analyze_hf":
        return _not_measured(name, "a pretrained model measured as it is: its step 0 is not an initialisation")
    if first != 0:
        return _not_measured(name, f"the first measurement is at step {first}, not at init")
    js0, ent0 = js.loc[js["step"] == 0, "value"], entropy.loc[entropy["step"] == 0, "value"]
    evidence = {"init_js_mean": float(js0.mean()), "init_entropy_norm_mean": float(ent0.mean()),
                "init_entropy_norm_min": float(ent0.min()), "init_scale": tables.setting("model.init_scale"),
                "thresholds": {"warn_below": t.init_js_warn, "fail_below": t.init_js_fail}}
    q = _pairs(tables, "q_cosine")
    if not q.empty:
        evidence["init_q_cosine_rms"] = float(np.sqrt((q.loc[q["step"] == q["step"].min(), "value"] ** 2).mean()))
    scale = tables.setting("model.init_scale")
    override = f"model.init_scale={_fmt(max(1.5, 2 * scale))}" if isinstance(scale, (int, float)) else "model.init_scale=1.5"
    override += " optim.warmup_ratio=0.1"
    mean_js = evidence["init_js_mean"]
    if mean_js < t.init_js_fail:
        return Finding(name, FAIL, f"at init the heads attend identically (JS {mean_js:.2g} nats < {t.init_js_fail})", evidence, override)
    if mean_js < t.init_js_warn:
        return Finding(name, WARN, f"at init the heads attend almost alike (JS {mean_js:.2g} nats < {t.init_js_warn})", evidence, override)
    return Finding(name, OK, f"heads differ from step 0 (JS {mean_js:.3g} nats)", evidence)


def check_warmup(tables: RunTables, t: Thresholds) -> Finding:
    """An Adam-family learning rate >= `warmup_lr` with (almost) no warm-up (article 5.1, 5.4)."""
    name = "warmup"
    lr, ratio, steps = (tables.setting(k) for k in ("optim.lr", "optim.warmup_ratio", "optim.warmup_steps"))
    total = tables.summary.get("global_step")
    target = str(tables.setting("optim.optimizer._target_") or "torch.optim.AdamW")
    if not isinstance(lr, (int, float)):
        return _not_measured(name, "optim.lr is not recorded in summary.json or the config")
    if "adam" not in target.lower():
        return _not_measured(name, f"the thresholds hold for Adam-family optimisers, not {target}")
    known_total = isinstance(total, (int, float)) and total > 0
    if steps is not None and (known_total or int(steps) == 0):
        warm, share = int(steps), (int(steps) / total if known_total else 0.0)
    elif steps is None and isinstance(ratio, (int, float)):  # before training the total may be unknown: the ratio is the share
        warm, share = (int(ratio * total) if known_total else None), float(ratio)
    else:
        return _not_measured(name, "neither optim.warmup_steps with a step count nor optim.warmup_ratio is recorded")
    evidence = {"lr": lr, "warmup_steps": warm, "total_steps": total, "warmup_share": share,
                "schedule": tables.setting("optim.schedule"), "optimizer": target,
                "thresholds": {"lr_at_least": t.warmup_lr, "share_below": t.warmup_min_ratio}}
    length = f"{share:.1%} of training" if warm is None else f"{warm} steps, {share:.1%} of training"
    if lr >= t.warmup_lr and not share >= t.warmup_min_ratio:
        return Finding(name, WARN, f"lr {lr:g} with a warm-up of {length}", evidence,
                       "optim=adamw optim.warmup_ratio=0.05 optim.schedule=cosine")
    return Finding(name, OK, f"lr {lr:g}, warm-up {length}", evidence)


def check_head_width(tables: RunTables, t: Thresholds) -> Finding:
    """Heads narrower than 32 dimensions (article 5.1)."""
    name = "head_width"
    pretrained = tables.summary.get("model") if isinstance(tables.summary.get("model"), dict) else {}
    d_head = tables.summary.get("head_dim") or tables.setting("model.d_head") or pretrained.get("d_head")
    d_model, n_heads = tables.setting("model.d_model"), tables.setting("model.n_heads") or pretrained.get("n_heads")
    if d_head is None and isinstance(d_model, int) and isinstance(n_heads, int) and n_heads > 0:
        d_head = d_model // n_heads
    if not isinstance(d_head, int):
        return _not_measured(name, "head_dim is not recorded (summary.json head_dim, model.d_head or d_model / n_heads)")
    evidence = {"head_dim": d_head, "n_heads": n_heads, "d_model": d_model, "threshold": t.min_head_dim}
    if d_head >= t.min_head_dim:
        return Finding(name, OK, f"heads are {d_head} wide", evidence)
    fewer = max(1, d_model // t.min_head_dim) if isinstance(d_model, int) else None
    override = f"model.n_heads={fewer}" if fewer else ""
    override = f"{override} (same budget) or model.d_head={t.min_head_dim}".strip()
    return Finding(name, WARN, f"heads are {d_head} wide (< {t.min_head_dim})", evidence, override)


def check_redundancy(tables: RunTables, t: Thresholds) -> Finding:
    """Near-duplicate heads at the last measurement (article 5.2, 5.4): the count in summary.json or
    the importance report when the run has one, else complete-linkage clusters of the `js` pair table."""
    name = "redundant_heads"
    n_heads_total = _head_count(tables)
    sources = ((SUMMARY, tables.summary.get("redundant_heads")), (IMPORTANCE_REPORT, (tables.importance or {}).get("redundant_heads")))
    source, reported = next(((name, v) for name, v in sources if isinstance(v, int)), (None, None))
    if reported is not None and n_heads_total:
        evidence = {"source": source, "redundant_heads": int(reported), "n_heads": n_heads_total}
    else:
        found = pair_table_redundancy(tables.head_pairs, t.redundancy_mass) if tables.head_pairs is not None else None
        if found is None:
            return _not_measured(name, "no importance.json redundancy and no js pair table")
        evidence = {"source": "head_pairs js", "step": found["step"], "js_threshold": found["js_threshold"],
                    "clusters": {entry["layer"]: entry["clusters"] for entry in found["layers"] if entry["clusters"]},
                    "redundant_heads": found["redundant_heads"], "n_heads": n_heads_total}
    frac = evidence["redundant_heads"] / evidence["n_heads"] if evidence["n_heads"] else math.nan
    evidence["redundant_fraction"] = frac
    n_heads = tables.setting("model.n_heads")
    if frac > t.redundant_frac_warn:
        fewer = f"model.n_heads={max(1, round(n_heads * (1 - frac)))}" if isinstance(n_heads, int) else "fewer heads"
        return Finding(name, WARN, f"{evidence['redundant_heads']} of {evidence['n_heads']} heads duplicate another ({frac:.0%})",
                       evidence, f"{fewer}, more training data, or headlab-prune on this run")
    return Finding(name, OK, f"{evidence['redundant_heads']} of {evidence['n_heads']} heads duplicate another", evidence)


def check_late_instability(tables: RunTables, t: Thresholds) -> Finding:
    """Roles still changing at the end: heads whose role settled only in the last `late_fraction`
    of the measured steps, or never (article 5.4: a high late learning rate washes roles out)."""
    name = "late_instability"
    settle = _settle_steps(tables)
    if settle is None:
        return _not_measured(name, "fewer than 3 measurements of the head roles")
    steps, settled = settle
    cutoff = steps[0] + (1 - t.late_fraction) * (steps[-1] - steps[0])
    late = settled[settled["settle_step"].isna() | (settled["settle_step"] > cutoff)]
    frac = len(late) / len(settled)
    evidence = {"n_heads": len(settled), "changing_late": [f"L{r.layer}H{r.head}" for r in late.itertuples()],
                "late_fraction": frac, "late_after_step": float(cutoff), "last_step": int(steps[-1]),
                "schedule": tables.setting("optim.schedule"), "lr": tables.setting("optim.lr")}
    if frac >= t.unstable_frac_warn:
        return Finding(name, WARN, f"{len(late)} of {len(settled)} heads still changed role after step {cutoff:.0f}", evidence,
                       "optim=adamw optim.schedule=cosine (decay the lr to 0), or train longer")
    return Finding(name, OK, f"{len(late)} of {len(settled)} heads changed role after step {cutoff:.0f}", evidence)


def check_stuck_heads(tables: RunTables, t: Thresholds) -> Finding:
    """Heads that end in the same unspecialised role (broad / mixed) they had at step 0."""
    name = "never_left_init_role"
    roles, which = _roles(tables)
    if roles.empty or roles["step"].nunique() < 2:
        return _not_measured(name, "fewer than 2 measurements of the head roles")
    first = roles[roles["step"] == roles["step"].min()].set_index(["layer", "head"])["value"]
    last = roles[roles["step"] == roles["step"].max()].set_index(["layer", "head"])["value"]
    idle = {ROLES.index(r) for r in UNSPECIALISED_ROLES}
    both = pd.concat({"first": first, "last": last}, axis=1).dropna()
    stuck = both[(both["first"] == both["last"]) & both["last"].isin(idle)]
    frac = len(stuck) / len(both) if len(both) else math.nan
    evidence = {"n_heads": len(both), "stuck": [f"L{l}H{h} ({ROLES[int(v)]})" for (l, h), v in stuck["last"].items()],
                "stuck_fraction": frac, "first_step": int(roles["step"].min()), "last_step": int(roles["step"].max()),
                "role": which}
    if frac >= t.stuck_frac_warn:
        return Finding(name, WARN, f"{len(stuck)} of {len(both)} heads end in their init {which}", evidence,
                       "model.init_scale=1.5 optim.warmup_ratio=0.1, or train longer (trainer.max_epochs)")
    return Finding(name, OK, f"{len(stuck)} of {len(both)} heads end in their init {which}", evidence)


def check_run_files(tables: RunTables, t: Thresholds) -> Finding:
    """Every file the checks read is readable: a corrupt table part or saved config is a failure,
    never a check quietly "not measured" in a run reported ok."""
    if tables.unreadable:
        return Finding("run_files", FAIL, f"{len(tables.unreadable)} file(s) cannot be read: {'; '.join(tables.unreadable)}",
                       {"unreadable": list(tables.unreadable)}, "restore the files from a copy, or re-run: overwrite=true")
    return Finding("run_files", OK, "every table part and the saved config read")


def check_finite_values(tables: RunTables, t: Thresholds) -> Finding:
    """No NaN or infinite value in the head tables: a mean over them would be NaN, or skip them, and
    either way change a verdict without a word. Their rows are left out of every check, and named here."""
    if tables.nonfinite:
        count = sum(int(entry.split(": ", 1)[1].split(" ", 1)[0]) for entry in tables.nonfinite)
        return Finding("finite_values", FAIL, f"{count} NaN or infinite value(s) in {len(tables.nonfinite)} part(s), left out of "
                       f"the other checks: {'; '.join(tables.nonfinite)}", {"nonfinite": list(tables.nonfinite)},
                       "re-measure the run (a diverged step?), or restore the parts from a copy")
    return Finding("finite_values", OK, "every value of the head tables is finite")


CHECKS: tuple[Callable[[RunTables, Thresholds], Finding], ...] = (
    check_run_status, check_init_variance, check_warmup, check_head_width, check_redundancy,
    check_late_instability, check_stuck_heads,
)


FILE_CHECKS = ("run_files", "finite_values")  # about the files themselves: kept whatever the run's status


def run_checks(tables: RunTables, thresholds: Thresholds | None = None) -> list[Finding]:
    """Every check in `CHECKS` order. A run that never completed gets only the status check's
    verdict; the table checks say they were not measured."""
    t = thresholds or Thresholds()
    findings = [check(tables, t) for check in CHECKS]
    if tables.nonfinite:  # named right after the status: the other checks read the finite rows only
        findings.insert(1, check_finite_values(tables, t))
    if tables.unreadable:  # named first after the status: the checks of those files say "not measured"
        findings.insert(1, check_run_files(tables, t))
    if tables.summary.get("status") not in ("completed", "running", "interrupted"):
        findings = [findings[0]] + [_not_measured(f.check, "the run did not complete")
                                    if f.status != NOT_MEASURED and f.check not in FILE_CHECKS else f for f in findings[1:]]
    return findings


# ---------------------------------------------------------------- helpers
def _settle_steps(tables: RunTables) -> tuple[np.ndarray, pd.DataFrame] | None:
    roles, _ = _roles(tables)
    if roles.empty or roles["step"].nunique() < 3:
        return None
    rows = []
    steps = np.sort(roles["step"].unique())
    for layer, in_layer in roles.groupby("layer"):
        cube = in_layer.pivot_table(index="step", columns="head", values="value", aggfunc="first").reindex(steps)
        settle = role_bifurcation_steps(steps.astype(float), cube.to_numpy(float)).numpy()
        rows += [{"layer": int(layer), "head": int(h), "settle_step": s} for h, s in zip(cube.columns, settle)]
    return steps, pd.DataFrame(rows)


def _head_count(tables: RunTables) -> int:
    m = tables.head_metrics
    if m is not None and not m.empty:
        return int(m[["layer", "head"]].drop_duplicates().shape[0])
    layers, heads = tables.setting("model.n_layers"), tables.setting("model.n_heads")
    return int(layers * heads) if isinstance(layers, int) and isinstance(heads, int) else 0


def _fmt(x: float) -> str:
    return f"{x:.3g}"
