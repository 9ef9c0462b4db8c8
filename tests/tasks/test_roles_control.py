"""The long-range role's control: a synthetic variant whose label needs no long-range feature.

Same texts and model as `test_roles_synthetic.py` (slow: about a minute of CPU), but the label is
previous XOR exclaim: the letter before the markers and the final mark decide it, the first/last
letter match (the planted long-range feature) is noise. A head that the role rule calls
`long_range` here would be a false positive: attention that is far and focused on content, not
position (see headlab.analysis.roles). The planted task itself must still find its long-range head
(test_roles_synthetic.py).
"""

from __future__ import annotations

import csv

import pytest

from headlab.analysis import ROLES
from headlab.tasks.train import train
from headlab.data.synthetic import generate_synthetic
from headlab.store import read_table

from tests._runs import TINY, compose_train_config
from .test_roles_synthetic import LEARNS


@pytest.fixture(scope="module")
def control_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("control")
    data = generate_synthetic(n=8000, seed=0)
    with open(folder / "control.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["text", "label"])
        for text, a, c in zip(data.texts, data.features["previous"], data.features["exclaim"]):
            writer.writerow([text, a ^ c])
    not_synthetic = [o for o in TINY + LEARNS if not o.startswith(("data=", "data.synthetic"))]
    run = folder / "run"
    summary = train(compose_train_config(run, [*not_synthetic, "trainer.limit_train_batches=1.0", "data=files",
                                               f"data.files.train={folder / 'control.csv'}"]))
    table = read_table(run / "head_metrics.parquet")
    roles = table[table.metric == "role"]
    by_step = {int(step): [ROLES[int(v)] for v in group.sort_values(["layer", "head"]).value]
               for step, group in roles.groupby("step")}
    return summary, by_step


@pytest.mark.slow
def test_no_head_is_long_range_when_the_label_has_no_long_range_feature(control_run):
    summary, by_step = control_run
    assert summary["val_acc"] > 0.9, "the control task was not learned; roles would mean nothing"
    long_range = {step: roles for step, roles in by_step.items() if "long_range" in roles}
    assert not long_range, long_range
