"""A single-process measurement of a checkpoint's network, to hold a DDP run's tables against."""

from __future__ import annotations

from pathlib import Path

from hydra.utils import instantiate

from headlab.analysis import METRIC_NAMES
from headlab.reload import load_network
from headlab.measure import measure_probe, probe_chunks
from tests._runs import compose_train_config


def measure_checkpoint(checkpoint: Path, overrides: list[str]) -> dict[tuple[int, int, str], float]:
    """{(layer, head, metric): value} of every probe metric, measured in this process alone on the
    probe the run's data config selects (the probe depends on the data config only)."""
    cfg = compose_train_config(checkpoint.parent.parent, [o for o in overrides if not o.startswith("trainer.")])
    datamodule = instantiate(cfg.data)
    datamodule.setup("fit")
    net = load_network(checkpoint)
    chunks = probe_chunks(datamodule.probe_set(), int(cfg.callbacks.head_metrics.chunk_size))
    measurement = measure_probe(net, chunks, map_len=int(cfg.callbacks.head_metrics.map_len), step=0, weight_metrics=False)
    return {(layer, head, name): float(values[head])
            for layer, metrics in enumerate(measurement.head_metrics)
            for name, values in metrics.items() if name in METRIC_NAMES
            for head in range(len(values))}
