"""W&B panels: a tiny offline run, read back from its own files (the .wandb log and the media)."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from headlab.analysis import ROLES
from headlab.lit.wandb_panels import head_scalars, head_table_rows
from headlab.measure import Measurement

TINY = ["data=synthetic", "data.synthetic.n=400", "data.probe_size=16", "data.batch_size=32", "model.d_model=16",
        "model.n_heads=2", "model.n_layers=2", "trainer.max_epochs=1", "trainer.limit_train_batches=4",
        "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false", "callbacks.progress_bar=null",
        "callbacks.head_metrics.every_n_steps=2", "callbacks.head_metrics.early_steps=2",
        "callbacks.head_metrics.figures=false", "callbacks.head_metrics.query_tokens=[y]", "test=false"]


def _wandb_records(path: Path):
    """Every protobuf record of a `.wandb` file (W&B's LevelDB-style log: 32 KiB blocks, 7-byte headers)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, block, header = path.read_bytes(), 32768, 7
    assert data[:4] == b":W&B"
    i, pending = 7, b""
    while i + header <= len(data):
        if block - i % block < header:  # a block's tail too short for a header is padding
            i += block - i % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[i:i + header])
        if kind == 0 and length == 0:
            break
        chunk, i = data[i + header:i + header + length], i + header + length
        pending = chunk if kind in (1, 2) else pending + chunk  # FULL, FIRST / MIDDLE, LAST
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            yield record


@pytest.fixture(scope="module")
def wandb_run(tmp_path_factory):
    from headlab.tasks.train import train

    run = tmp_path_factory.mktemp("wandb_run")
    GlobalHydra.instance().clear()
    with initialize_config_module("headlab.conf", version_base="1.3"):
        cfg = compose("train", overrides=TINY + ["logger=wandb"], return_hydra_config=True)
    HydraConfig().set_config(cfg)
    with open_dict(cfg):
        cfg.paths.output_dir, cfg.paths.log_dir = str(run), str(run.parent)
        del cfg["hydra"]
    train(cfg)
    offline = next((run / "wandb").glob("offline-run-*"))
    deadline = time.monotonic() + 60
    while True:  # wandb-core may still be writing the log when wandb.finish() returns: wait for its exit record
        records = list(_wandb_records(next(offline.glob("run-*.wandb"))))
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    history = [{item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
               for r in records if r.WhichOneof("record_type") == "history"]
    metrics = [r.metric for r in records if r.WhichOneof("record_type") == "metric"]
    return offline, history, metrics


def test_head_series_are_keyed_by_the_optimiser_step(wandb_run):
    _, history, metrics = wandb_run
    assert any(m.glob_name == "heads/*" and m.step_metric == "trainer/global_step" for m in metrics)
    scalar_rows = [h for h in history if "heads/entropy/L0H0" in h]
    assert [h["trainer/global_step"] for h in scalar_rows] == [0, 2, 4]  # step 0, cadence 2, epoch end 4
    keys = set(scalar_rows[0])
    assert {"heads/entropy/L1H1", "heads/role/L0H0", "heads/prev_score@y/L1H0", "heads/mean_js/L1"} <= keys
    assert not any(k.startswith("heads/L") for k in keys)  # one layout: metric first, then layer and head


def test_each_measurement_logs_an_attention_grid_and_a_head_table(wandb_run):
    offline, history, _ = wandb_run
    media = [h for h in history if "heads/table/_type" in h]
    assert [h["trainer/global_step"] for h in media] == [0, 2, 4]
    last = media[-1]
    assert last["heads/attention_maps/_type"] == "image-file" and last["heads/table/_type"] == "table-file"
    png = offline / "files" / last["heads/attention_maps/path"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = json.loads((offline / "files" / last["heads/table/path"]).read_text())
    columns = table["columns"]
    assert columns[:4] == ["step", "layer", "head", "role"] and "entropy" in columns and "role@y" in columns
    assert [row[:3] for row in table["data"]] == [[4, 0, 0], [4, 0, 1], [4, 1, 0], [4, 1, 1]]
    assert all(row[3] in ROLES and row[columns.index("role@y")] in ROLES for row in table["data"])
    # the table holds the very numbers the scalar series hold at that step
    scalars = next(h for h in history if h.get("trainer/global_step") == 4 and "heads/entropy/L1H0" in h)
    assert table["data"][2][columns.index("entropy")] == pytest.approx(scalars["heads/entropy/L1H0"])


def test_scalar_keys_and_table_rows_by_hand():
    m = Measurement(7, 1, [{"entropy": np.array([0.5, 1.5]), "role": np.array([1.0, 3.0]),
                            "role@y": np.array([0.0, 5.0])}],
                    [{"js": np.array([[0, .3], [.3, 0]]), "corr": np.array([[1, -.5], [-.5, 1]])}],
                    np.zeros((1, 2, 2, 2)), [["local", "broad"]])
    assert head_scalars(m) == {"heads/entropy/L0H0": 0.5, "heads/entropy/L0H1": 1.5, "heads/role/L0H0": 1.0,
                               "heads/role/L0H1": 3.0, "heads/role@y/L0H0": 0.0, "heads/role@y/L0H1": 5.0,
                               "heads/mean_js/L0": 0.3, "heads/mean_corr/L0": -0.5}
    columns, rows = head_table_rows(m)
    assert columns == ["step", "layer", "head", "role", "entropy", "role@y"]
    assert rows == [[7, 0, 0, "local", 0.5, "previous_token"], [7, 0, 1, "broad", 1.5, "mixed"]]


