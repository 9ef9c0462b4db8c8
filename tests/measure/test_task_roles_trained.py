"""A classifier trained on a planted task: the task-aware role finds the head that reads the deciding
token from [CLS], where the all-query role (every query averaged) does not."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests._planted import train_planted


@pytest.fixture(scope="module", params=["last", "anywhere"])
def planted(request):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on a shared machine: extra threads only spin
    try:
        planted = train_planted(request.param)
    finally:
        torch.set_num_threads(threads)
    assert planted.acc > 0.95, f"the planted task did not train ({planted.acc:.2f}): nothing to find"
    return request.param, planted.measurements[-1]


def test_the_head_that_reads_the_deciding_token_from_cls_is_named(planted):
    where, m = planted
    metrics = m.head_metrics[0]
    reader = int(np.argmax(metrics["confidence@task"]))  # the head whose [CLS] row is most focused
    if where == "last":
        assert metrics["last_attention@task"][reader] > 0.5
        assert m.task_roles[0][reader] == "vertical"  # from [CLS]: most of its mass on the last token
        assert metrics["last_attention"][reader] < 0.5 and m.roles[0][reader] not in ("vertical", "sink", "long_range")
    else:
        assert metrics["last_attention@task"][reader] < 0.2
        assert m.task_roles[0][reader] == "content"  # a keyword wherever it is
    assert m.decision == "cls" and all(role == "mixed" for role in m.roles[0])  # all queries: nothing to see
