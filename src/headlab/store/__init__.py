"""Per-run tables and atomic writes (no torch, no Lightning)."""

from headlab.store.atomic import (
    atomic_path,
    atomic_write_bytes,
    atomic_write_csv,
    atomic_write_json,
    atomic_write_text,
    atomic_write_with,
)
from headlab.store.tables import (
    HEAD_METRICS,
    HEAD_PAIRS,
    ATTENTION_MAPS,
    append_part,
    drop_parts_after,
    head_metric_rows,
    head_pair_rows,
    read_table,
    replace_steps,
    write_attention_maps,
)

__all__ = [
    "ATTENTION_MAPS",
    "HEAD_METRICS",
    "HEAD_PAIRS",
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
    "read_table",
    "replace_steps",
    "write_attention_maps",
]
