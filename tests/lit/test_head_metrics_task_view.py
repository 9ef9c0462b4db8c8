"""The callback's task-aware view: `{metric}@task` is reserved, so a query token named `task` is refused up front."""

from __future__ import annotations

import pytest

from headlab.errors import ConfigError
from headlab.lit.callbacks import HeadMetricsCallback


def test_a_query_token_named_task_is_refused_before_training():
    with pytest.raises(ConfigError, match=r"invalid config callbacks.head_metrics.query_tokens=\['y', 'task'\]: "
                                          r"expected tokens other than 'task'"):
        HeadMetricsCallback(query_tokens=["y", "task"])
    assert HeadMetricsCallback(query_tokens=["y", "[CLS]"]).query_tokens == ["y", "[CLS]"]
