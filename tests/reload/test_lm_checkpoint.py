"""LM runs through the run-dir tools: `load_network` rebuilds a `HeadlabLM` from its checkpoint (same
logits), a bad model_config is one CheckpointError, and (slow) a real `experiment=induction` run goes
through load_network, TransformerLens, importance, pruning, doctor and view."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from headlab.errors import HeadlabError
from headlab.lit.lm_module import CausalLMModule
from headlab.model.lm import HeadlabLM
from headlab.reload import load_network
from headlab.store.checkpoint_file import CheckpointError

CONFIG = {"vocab_size": 11, "max_len": 12, "n_layers": 2, "n_heads": 2, "d_model": 16}


def _write_lm_checkpoint(path: Path, **config) -> CausalLMModule:
    """The checkpoint Lightning writes for CausalLMModule (`state_dict` with the `net.` prefix, its saved
    hyper-parameters), of a module moved off its init."""
    torch.manual_seed(0)
    module = CausalLMModule({**CONFIG, **config})
    with torch.no_grad():
        for param in module.parameters():
            param.add_(0.1 * torch.randn_like(param))
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams), "global_step": 7}, path)
    return module.eval()


def test_load_network_rebuilds_the_lm_with_its_logits(tmp_path):
    module = _write_lm_checkpoint(tmp_path / "last.ckpt", pos_encoding="rope", tied_unembed=True)
    net = load_network(tmp_path / "last.ckpt")
    assert isinstance(net, HeadlabLM) and not net.training and net.config.pos_encoding == "rope"
    tokens = torch.randint(0, 11, (3, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(net(tokens).logits, module(tokens), rtol=0, atol=0)


def test_a_model_config_no_model_takes_is_one_checkpoint_error(tmp_path):
    path = tmp_path / "last.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"model_config": {**CONFIG, "n_expert": 4}}}, path)
    with pytest.raises(CheckpointError, match=r"LMConfig does not take: \['n_expert'\]"):
        load_network(path)
    torch.save({"state_dict": {}, "hyper_parameters": {"model_config": {**CONFIG, "n_heads": 0}}}, path)
    with pytest.raises(CheckpointError, match="not a valid LMConfig: invalid config model.n_heads=0"):
        load_network(path)


def test_a_run_config_says_whether_it_trained_an_lm():
    from omegaconf import OmegaConf

    from headlab.reload import is_language_model

    lm = OmegaConf.create({"model": {"_target_": "headlab.model.lm.LMConfig"}})
    assert is_language_model(lm) and not is_language_model(OmegaConf.create({"model": {"n_heads": 4}}))


def test_without_transformer_lens_the_hand_off_says_what_to_install(monkeypatch, tmp_path):
    from headlab.reload.hooked import to_hooked_transformer

    monkeypatch.setitem(sys.modules, "transformer_lens", None)  # `import transformer_lens` raises ImportError
    with pytest.raises(HeadlabError, match=r"needs TransformerLens: pip install -e '\.\[tl\]'"):
        to_hooked_transformer(tmp_path)


TINY_LM = ["experiment=induction", "trainer.max_steps=6", "data.n_train=192", "data.n_eval=32", "data.probe_size=8",
           "callbacks.lm_metrics.every_n_steps=3", "trainer.enable_model_summary=false"]


@pytest.mark.slow
def test_an_induction_run_goes_through_every_run_dir_tool(tmp_path, one_thread):
    from tests._runs import compose_train_config, train_keeping_threads

    run = tmp_path / "run"
    train_keeping_threads(compose_train_config(run, TINY_LM))
    net = load_network(run / "checkpoints" / "last.ckpt")
    assert isinstance(net, HeadlabLM)

    from headlab.reload import build_datamodule, load_matching_network, run_config
    from headlab.store import RunDir

    cfg = run_config(RunDir(run))
    data = build_datamodule(cfg)
    matched = load_matching_network(run / "checkpoints" / "last.ckpt", cfg, data)
    tokens = data.probe[:4]  # [4, 1 + gap + 2 * half_len]
    with torch.no_grad():
        torch.testing.assert_close(matched(tokens).logits, net(tokens).logits, rtol=0, atol=0)
    if importlib.util.find_spec("transformer_lens") is not None:
        from headlab.reload.hooked import to_hooked_transformer

        with torch.no_grad():
            torch.testing.assert_close(to_hooked_transformer(run)(tokens), net(tokens).logits, atol=1e-4, rtol=1e-5)

    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "HEADLAB_LOG_DIR": str(tmp_path / "logs")}
    for command, says in (("headlab-importance", "most important of 8"), ("headlab-prune", "speed-up"),
                          ("headlab-doctor", "run_status"), ("headlab-view", "wrote")):
        done = subprocess.run([str(bin_dir / command), str(run)], capture_output=True, text=True, env=env, timeout=300)
        out = (done.stdout + done.stderr).strip()
        assert done.returncode == 0 and says in out, (command, out[-800:])
    assert (run / "view.html").is_file() and (run / "head_importance.parquet").is_file() and (run / "prune.json").is_file()


def test_an_lm_run_is_refused_as_a_distillation_teacher(tmp_path):
    from headlab.distill.teacher import load_teacher
    from headlab.errors import ConfigError

    _write_lm_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    (tmp_path / "vocab.json").write_text("{}")
    with pytest.raises(ConfigError, match="a classifier's run dir; it holds a HeadlabLM"):
        load_teacher(tmp_path, "last")


