"""The run directory (`RunDir`: its file names, summary, checkpoints), the sweep folder (`SweepDir`,
`is_sweep_dir`), per-run tables and atomic writes (no torch, no Lightning)."""

from headlab.store.atomic import (
    atomic_path,
    atomic_write_bytes,
    atomic_write_csv,
    atomic_write_json,
    atomic_write_text,
    atomic_write_with,
    remove_interrupted_writes,
)
from headlab.store.run_dir import (
    ATTENTION_MAPS,
    CHECKPOINT_CHOICES,
    HEAD_IMPORTANCE,
    HEAD_METRICS,
    HEAD_PAIRS,
    IMPORTANCE_CURVES,
    PRUNE_CURVE,
    RunCheckpointFile,
    RunDir,
)
from headlab.store.sweep_dir import AGGREGATE_DIR, SweepDir, is_sweep_dir
from headlab.store.tables import (
    ROLE_NAME,
    append_part,
    drop_parts_after,
    head_metric_rows,
    head_pair_rows,
    read_table,
    replace_steps,
    write_attention_maps,
)

__all__ = [
    "AGGREGATE_DIR",
    "ATTENTION_MAPS",
    "CHECKPOINT_CHOICES",
    "HEAD_IMPORTANCE",
    "HEAD_METRICS",
    "HEAD_PAIRS",
    "IMPORTANCE_CURVES",
    "PRUNE_CURVE",
    "ROLE_NAME",
    "RunCheckpointFile",
    "RunDir",
    "SweepDir",
    "append_part",
    "atomic_path",
    "atomic_write_csv",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "atomic_write_with",
    "drop_parts_after",
    "head_metric_rows",
    "head_pair_rows",
    "is_sweep_dir",
    "read_table",
    "remove_interrupted_writes",
    "replace_steps",
    "write_attention_maps",
]
