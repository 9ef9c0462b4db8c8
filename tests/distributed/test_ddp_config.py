"""DDP inside a local multirun would re-launch ranks into the single-run directory: refused up front."""

from __future__ import annotations

from tests._runs import run_cli


def test_ddp_in_a_local_multirun_is_refused_naming_the_key(tmp_path):
    result = run_cli(tmp_path, "-m", "debug=fast", "data=synthetic", "data.synthetic.n=400", "data.probe_size=16",
                     "trainer.strategy=ddp", "trainer.devices=2", timeout=300)
    assert result.returncode != 0
    assert "invalid config trainer.strategy='ddp': expected auto in a multirun" in result.stderr
    assert not list((tmp_path / "logs").rglob("*.ckpt"))  # refused before any training
