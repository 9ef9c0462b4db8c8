"""The LM probe measurement on the standard test: the repeated probe the datamodule draws, the
fixed-distance induction score and the ICL score with its standard error, each against a computation
written here from the network's own patterns and logits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from scipy import stats

from headlab.data.lm_datamodule import RepeatTokensDataModule
from headlab.measure.lm_probe import measure_lm_probe
from headlab.model.lm import HeadlabLM, LMConfig


@pytest.fixture(scope="module")
def data() -> RepeatTokensDataModule:
    module = RepeatTokensDataModule(vocab_size=16, max_len=15, max_segment=6, n_train=8, n_eval=8, probe_size=6, probe_half_len=3,
                                    probe_max_gap=4, seed=1)
    module.setup()
    return module


def test_the_repeated_probe_is_bos_then_a_block_twice_the_longest_that_fits(data):
    probe = data.repeated_probe(5)
    half = (15 - 1) // 2
    assert probe.shape == (5, 1 + 2 * half) and (probe[:, 0] == 0).all()
    assert torch.equal(probe[:, 1:1 + half], probe[:, 1 + half:]) and (probe[:, 1:] >= 1).all()
    gapped = data.probe.clone()
    assert torch.equal(data.repeated_probe(5), probe) and torch.equal(data.probe, gapped)  # fixed, and leaves the probe alone


def test_standard_test_scores_equal_a_computation_from_the_networks_patterns(data):
    torch.manual_seed(0)
    net = HeadlabLM(LMConfig(vocab_size=16, max_len=15, n_layers=2, n_heads=2, d_model=16)).eval()
    repeated = data.repeated_probe(7)
    half = (repeated.size(1) - 1) // 2
    measured = measure_lm_probe(net, data.probe, data.probe_half_len, chunk_size=3, repeated=repeated)
    with torch.no_grad():
        out = net(repeated, return_patterns=True)
    for layer, pattern in enumerate(out.patterns):  # [7, head, 15, 15]
        stripe = torch.stack([pattern[:, :, i, i - half + 1] for i in range(half + 1, 2 * half + 1)], -1)
        torch.testing.assert_close(measured.per_layer[layer]["rep_induction_score"], stripe.mean((0, 2)).double())
    loss = F.cross_entropy(out.logits[:, :-1].transpose(1, 2), repeated[:, 1:], reduction="none")  # [7, 14]
    differences = (loss[:, 2 * half - 1] - loss[:, half - 1]).double()  # predicting the last token vs the first block's last
    assert measured.rep_icl == pytest.approx(differences.mean().item(), abs=1e-6)
    assert measured.rep_icl_se == pytest.approx(float(stats.sem(differences.numpy())), abs=1e-6)
    plain = measure_lm_probe(net, data.probe, data.probe_half_len)
    assert "rep_induction_score" not in plain.per_layer[0] and plain.rep_icl is None
    assert plain.icl == pytest.approx(measured.icl, abs=1e-6) and plain.icl_se == pytest.approx(measured.icl_se, abs=1e-6)
    assert plain.icl_se > 0


def test_on_real_text_the_repeated_probe_draws_the_gapped_probes_frequent_characters(tmp_path):
    from headlab.data.lm_datamodule import FilesLMDataModule
    from headlab.data.tokenizer import CLS_ID

    csv = tmp_path / "texts.csv"
    csv.write_text("text\n" + "\n".join(f"今天天气很好{i % 7}，我们去公园散步。" for i in range(80)) + "\n", encoding="utf-8")
    data = FilesLMDataModule(files={"train": str(csv)}, max_len=17, min_freq=1, probe_half_len=4, probe_max_gap=4,
                             probe_size=4, probe_vocab=5)
    probe = data.repeated_probe(50)
    assert probe.shape == (50, 17) and (probe[:, 0] == CLS_ID).all()
    assert torch.equal(probe[:, 1:9], probe[:, 9:])
    assert set(probe[:, 1:].unique().tolist()) == set(data.probe_ids.tolist())  # the 5 most frequent, all drawn in 400


def test_causal_entropy_is_the_probes_mean_of_each_querys_entropy_over_the_keys_it_sees(data):
    import math

    torch.manual_seed(1)
    net = HeadlabLM(LMConfig(vocab_size=16, max_len=15, n_layers=2, n_heads=2, d_model=16)).eval()
    measured = measure_lm_probe(net, data.probe, data.probe_half_len, chunk_size=4)
    with torch.no_grad():
        patterns = net(data.probe, return_patterns=True).patterns
    seq = data.probe.size(1)
    for layer, pattern in enumerate(patterns):  # [n, head, seq, seq]
        by_hand = [sum(stats.entropy(pattern[b, h, i, : i + 1].double().numpy()) / math.log(i + 1) for i in range(1, seq))
                   / (seq - 1) for h in range(2) for b in range(data.probe.size(0))]
        expected = torch.tensor(by_hand, dtype=torch.float64).view(2, -1).mean(1)
        torch.testing.assert_close(measured.per_layer[layer]["causal_entropy_norm"], expected, atol=1e-5, rtol=0)


def test_head_pairs_equal_scipys_jensen_shannon_and_pearson_on_the_networks_own_patterns(data):
    """Each layer's `js[a, b]`: scipy's Jensen-Shannon (squared distance, nats) of the two heads' smoothed
    rows, averaged over every query of every probe sequence; `corr[a, b]`: numpy's Pearson r of the two
    maps per sequence, averaged over sequences. A chunk size that splits the probe gives the same."""
    import numpy as np
    from scipy.spatial.distance import jensenshannon

    torch.manual_seed(3)
    net = HeadlabLM(LMConfig(vocab_size=16, max_len=15, n_layers=2, n_heads=3, d_model=24)).eval()
    measured = measure_lm_probe(net, data.probe, data.probe_half_len, chunk_size=4)
    with torch.no_grad():
        out = net(data.probe, return_patterns=True)
    for layer, pattern in enumerate(out.patterns):
        maps = pattern.double().numpy()  # [n, head, q, k]
        n_keys = maps.shape[-1]
        smoothed = 0.001 / n_keys + 0.999 * maps
        for a in range(3):
            for b in range(3):
                js = np.mean([jensenshannon(smoothed[s, a, q], smoothed[s, b, q]) ** 2
                              for s in range(maps.shape[0]) for q in range(maps.shape[2])])
                r = np.mean([np.corrcoef(maps[s, a].ravel(), maps[s, b].ravel())[0, 1] for s in range(maps.shape[0])])
                assert measured.head_pairs[layer]["js"][a, b].item() == pytest.approx(js, abs=1e-6)
                assert measured.head_pairs[layer]["corr"][a, b].item() == pytest.approx(r, abs=1e-6)
    assert measured.head_pairs[1]["js"][0, 1] > 0  # heads of a random net differ
