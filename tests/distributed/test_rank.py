"""`process_rank` follows Lightning's rank rule without importing Lightning."""

from __future__ import annotations


import pytest

from headlab.tasks.rank import RANK_VARIABLES, is_rank_zero, process_rank


@pytest.mark.parametrize("env", [{}, {"LOCAL_RANK": "1"}, {"SLURM_PROCID": "3"}, {"RANK": "2", "LOCAL_RANK": "0"},
                                 {"LOCAL_RANK": "0", "SLURM_PROCID": "5"}, {"JSM_NAMESPACE_RANK": "4"}])
def test_same_rank_as_lightning(monkeypatch, env):
    from lightning.fabric.utilities import rank_zero

    for key in RANK_VARIABLES:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert process_rank() == (rank_zero._get_rank() or 0)
    assert is_rank_zero() == (process_rank() == 0)
