"""DDP inside a local multirun would re-launch ranks into the single-run directory: refused up front."""

from __future__ import annotations

from tests._runs import train_in_process


def test_ddp_in_a_local_multirun_is_refused_naming_the_key(tmp_path, monkeypatch, capfd):
    result = train_in_process(tmp_path, monkeypatch, capfd, "-m", "debug=fast", "data=synthetic", "data.synthetic.n=400",
                              "data.probe_size=16", "trainer.strategy=ddp", "trainer.devices=2")
    assert result.returncode != 0
    assert "invalid config trainer.strategy='ddp': expected auto in a multirun" in result.stderr
    assert not list((tmp_path / "logs").rglob("*.ckpt"))  # refused before any training


def test_a_later_call_in_the_same_process_does_not_print_the_refused_sweeps_folder(tmp_path, monkeypatch, capfd):
    """`main` prints its sweep's folder last; a sweep an earlier call started (here refused) is not the next call's."""
    first = train_in_process(tmp_path, monkeypatch, capfd, "-m", "debug=fast", "data=synthetic", "data.synthetic.n=400",
                             "data.probe_size=16", "trainer.strategy=ddp", "trainer.devices=2")
    assert "multiruns" in first.stdout  # the refused sweep's folder was printed by that call
    second = train_in_process(tmp_path, monkeypatch, capfd, "model.n_heads=3")  # refused: 3 does not divide d_model
    assert second.returncode == 2 and "model.n_heads" in second.stderr
    assert second.stdout == ""
