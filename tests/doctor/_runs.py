"""Hand-made run tables for the doctor's tests: a healthy run, and edits that break one thing each.

The healthy run: 1 layer x 4 heads of width 32, AdamW lr 1e-3 with 5 % warm-up over 600 steps;
at step 0 every head is `mixed` with distinct but broad attention (JS 0.3 nats between heads);
by step 100 the heads hold four different specialised roles and keep them to the end (JS 0.4).
"""

from __future__ import annotations

import pandas as pd

from headlab.analysis.roles import ROLES
from headlab.doctor import RunTables

STEPS = (0, 50, 100, 200, 300, 400, 500, 600)
FINAL_ROLES = ("previous_token", "local", "long_range", "vertical")
N_HEADS = 4


def roles_table(roles_by_step: dict[int, list[str]]) -> pd.DataFrame:
    return pd.DataFrame([{"step": s, "layer": 0, "head": h, "metric": "role", "value": float(ROLES.index(r))}
                         for s, roles in roles_by_step.items() for h, r in enumerate(roles)])


def healthy_roles() -> dict[int, list[str]]:
    return {s: ["mixed"] * N_HEADS if s < 100 else list(FINAL_ROLES) for s in STEPS}


def entropy_table(at_init: float = 0.7) -> pd.DataFrame:
    return pd.DataFrame([{"step": s, "layer": 0, "head": h, "metric": "entropy_norm", "value": at_init if s == 0 else 0.4}
                         for s in STEPS for h in range(N_HEADS)])


def js_table(js_by_step: dict[int, float] | None = None, last_matrix=None) -> pd.DataFrame:
    """Symmetric js rows for every ordered pair; `last_matrix[a][b]` overrides the last step."""
    js_by_step = js_by_step or {s: (0.3 if s == 0 else 0.4) for s in STEPS}
    rows = []
    for s, v in js_by_step.items():
        for a in range(N_HEADS):
            for b in range(N_HEADS):
                value = 0.0 if a == b else (last_matrix[a][b] if last_matrix is not None and s == STEPS[-1] else v)
                rows.append({"step": s, "layer": 0, "head_a": a, "head_b": b, "metric": "js", "value": value})
    return pd.DataFrame(rows)


def healthy_tables(**summary_changes) -> RunTables:
    swept = {"optim.lr": 1e-3, "optim.warmup_ratio": 0.05, "optim.warmup_steps": None, "optim.schedule": "cosine",
             "model.init_scale": 1.0, "model.d_model": 128, "model.n_heads": N_HEADS, "model.n_layers": 1}
    summary = {"status": "completed", "val_loss": 0.4, "global_step": STEPS[-1], "head_dim": 32, "swept": swept}
    summary.update(summary_changes)
    metrics = pd.concat([roles_table(healthy_roles()), entropy_table()], ignore_index=True)
    config = {"optim": {"optimizer": {"_target_": "torch.optim.AdamW"}}}
    return RunTables(summary=summary, config=config, head_metrics=metrics, head_pairs=js_table())
