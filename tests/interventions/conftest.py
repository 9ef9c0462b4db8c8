"""One torch thread for these tiny models: on a shared 2-core machine, two threads spin-wait
on each other and a 1 ms forward takes 100 ms."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
