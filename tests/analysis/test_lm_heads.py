"""LM head scores: hand-built patterns give 1 / 0 exactly, TransformerLens' detect_head agrees."""

from __future__ import annotations

import pytest
import torch

from headlab.analysis.lm_heads import (
    duplicate_token_pattern,
    icl_score,
    induction_pattern,
    lm_pattern_score_sums,
    lm_pattern_scores,
    ov_copying_score,
    per_position_loss,
)
from headlab.errors import DataError


def _one_hot(targets: list[int]) -> torch.Tensor:
    """[1, 1, n, n] pattern: query i attends to targets[i] only."""
    n = len(targets)
    pattern = torch.zeros(n, n)
    pattern[torch.arange(n), torch.tensor(targets)] = 1.0
    return pattern[None, None]


REPEATED = torch.tensor([[0, 5, 6, 7, 8, 5, 6, 7, 8]])  # BOS, block, block


def test_previous_token_head_scores_one_and_others_zero():
    n = REPEATED.shape[1]
    scores = lm_pattern_scores(_one_hot([0] + list(range(n - 1))), REPEATED)
    assert scores["prev_token_score"].item() == 1.0
    assert scores["induction_score"].item() == 0.0
    assert scores["duplicate_score"].item() == 0.0


def test_induction_head_scores_one_on_the_repeated_block():
    # first half: attend BOS (excluded); second half: the token after the earlier copy (5 -> 6 at 2, ...)
    targets = [0, 0, 0, 0, 0, 2, 3, 4, 5]
    scores = lm_pattern_scores(_one_hot(targets), REPEATED)
    assert scores["induction_score"].item() == 1.0
    assert scores["duplicate_score"].item() == 0.0
    # query 5 attends key 2 ... : none of them is i - 1
    assert scores["prev_token_score"].item() == 0.0


def test_duplicate_head_scores_one():
    targets = [0, 0, 0, 0, 0, 1, 2, 3, 4]
    scores = lm_pattern_scores(_one_hot(targets), REPEATED)
    assert scores["duplicate_score"].item() == 1.0
    assert scores["induction_score"].item() == 0.0


def test_half_on_target_is_half_and_bos_excluded():
    n = REPEATED.shape[1]
    pattern = torch.zeros(1, 1, n, n)
    for i in range(1, n):
        pattern[0, 0, i, i - 1] += 0.5
        pattern[0, 0, i, i] += 0.25  # current token: excluded
        pattern[0, 0, i, 0] += 0.25  # BOS: excluded
    pattern[0, 0, 0, 0] = 1.0
    scores = lm_pattern_scores(pattern, REPEATED)
    assert scores["prev_token_score"].item() == pytest.approx(1.0)
    kept = lm_pattern_scores(pattern, REPEATED, exclude_bos=False, exclude_current_token=False)
    # every row sums to 1, so the share is (8 rows x 0.5 on i-1, where row 1's i-1 is BOS: +0.25) / 9
    assert kept["prev_token_score"].item() == pytest.approx((8 * 0.5 + 0.25) / 9)


def test_sums_over_chunks_equal_the_whole():
    torch.manual_seed(0)
    tokens = torch.randint(1, 6, (6, 10))
    pattern = torch.rand(6, 3, 10, 10).tril().softmax(-1)
    whole = lm_pattern_scores(pattern, tokens)
    a, b = lm_pattern_score_sums(pattern[:2], tokens[:2]), lm_pattern_score_sums(pattern[2:], tokens[2:])
    for name, value in whole.items():
        torch.testing.assert_close((a[name] + b[name]) / 6, value)


def test_patterns_are_transformer_lens_definitions_by_hand():
    tokens = torch.tensor([[0, 3, 4, 3, 4]])
    assert duplicate_token_pattern(tokens)[0].tolist() == [
        [0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0]]
    assert induction_pattern(tokens)[0].tolist() == [
        [0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 0]]


def test_bad_shapes_are_one_clear_error():
    with pytest.raises(DataError, match="tokens"):
        lm_pattern_scores(torch.rand(1, 1, 4, 4), torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(DataError, match="pattern"):
        lm_pattern_scores(torch.rand(1, 4, 4), torch.zeros(1, 4, dtype=torch.long))


def test_copying_score_of_identity_circuit_is_one_and_of_negation_minus_one():
    vocab, d_model, d_head = 7, 5, 5
    W_E = torch.randn(vocab, d_model, dtype=torch.float64)
    W_U = torch.linalg.pinv(W_E)  # W_E W_U is the projection on W_E's row space: eigenvalues 1 and 0
    eye = torch.eye(d_model, dtype=torch.float64)[None]
    scores = ov_copying_score(W_E, torch.cat([eye, eye]), torch.cat([eye, -eye]), W_U)
    torch.testing.assert_close(scores, torch.tensor([1.0, -1.0], dtype=torch.float64))


def test_copying_score_equals_the_full_vocab_circuit():
    torch.manual_seed(1)
    vocab, d_model, d_head, heads = 11, 8, 3, 2
    W_E, W_U = torch.randn(vocab, d_model), torch.randn(d_model, vocab)
    W_V, W_O = torch.randn(heads, d_model, d_head), torch.randn(heads, d_head, d_model)
    scores = ov_copying_score(W_E, W_V, W_O, W_U)
    for h in range(heads):
        eig = torch.linalg.eigvals((W_E @ W_V[h] @ W_O[h] @ W_U).double())
        assert scores[h].item() == pytest.approx((eig.real.sum() / eig.abs().sum()).item(), abs=1e-6)


def test_per_position_loss_and_icl_score_by_hand():
    logits = torch.zeros(1, 3, 4)
    logits[0, 1, 2] = 100.0  # position 1 predicts token 2 perfectly
    loss = per_position_loss(logits, torch.tensor([[0, 1, 2]]))
    assert loss[0, 0].item() == pytest.approx(torch.log(torch.tensor(4.0)).item())
    assert loss[0, 1].item() == pytest.approx(0.0, abs=1e-6)
    assert icl_score(loss, late=1, early=0) == pytest.approx(-torch.log(torch.tensor(4.0)).item())
    with pytest.raises(DataError, match="early"):
        icl_score(loss, late=0, early=1)


def test_scores_equal_transformer_lens_detect_head():
    tl = pytest.importorskip("transformer_lens")
    from transformer_lens.head_detector import detect_head

    torch.manual_seed(0)
    cfg = tl.HookedTransformerConfig(n_layers=2, n_heads=3, d_model=24, d_head=8, n_ctx=32, d_vocab=9,
                                     attn_only=True, act_fn=None, normalization_type=None, seed=0)
    model = tl.HookedTransformer(cfg)  # random init from a config: nothing downloads
    with torch.no_grad():  # sharpen the random patterns so the scores are not all ~equal
        for block in model.blocks:
            block.attn.W_Q.mul_(4.0)
    tokens = torch.tensor([[0, 3, 5, 1, 7, 3, 5, 1, 7, 2, 3, 5]])
    model.to_tokens = lambda seq, **_: tokens  # the model has no tokenizer: the "text" is these tokens
    _, cache = model.run_with_cache(tokens)
    for name, head in (("prev_token_score", "previous_token_head"), ("duplicate_score", "duplicate_token_head"),
                       ("induction_score", "induction_head")):
        theirs = detect_head(model, "tokens", head, exclude_bos=True, exclude_current_token=True)
        ours = torch.stack([lm_pattern_scores(cache["pattern", layer], tokens)[name] for layer in range(2)])
        torch.testing.assert_close(ours.float(), theirs.float(), atol=1e-5, rtol=1e-5)


def test_lm_roles_name_the_dominant_pattern_above_the_bar():
    from headlab.analysis.lm_heads import lm_roles

    scores = {"prev_token_score": torch.tensor([0.9, 0.1, 0.2, 0.3]), "duplicate_score": torch.tensor([0.0, 0.6, 0.1, 0.3]),
              "induction_score": torch.tensor([0.05, 0.2, 0.8, 0.39])}
    assert lm_roles(scores) == ["previous", "duplicate", "induction", "other"]


def test_repeated_stripe_score_is_one_for_an_induction_head_and_zero_for_a_previous_token_head():
    from headlab.analysis.lm_heads import repeated_stripe_score_sums

    half = 4  # [BOS, a b c d, a b c d]: query i of the second block attends key i - 3, the token after the copy
    induction = _one_hot([0, 0, 0, 0, 0, 2, 3, 4, 5])
    previous = _one_hot([0] + list(range(8)))
    assert repeated_stripe_score_sums(induction, half).tolist() == [1.0]
    assert repeated_stripe_score_sums(previous, half).tolist() == [0.0]
    # two sequences are summed, not averaged: the caller divides by the probe's size
    assert repeated_stripe_score_sums(torch.cat([induction, previous]), half).tolist() == [1.0]


def test_repeated_stripe_score_is_transformer_lens_demo_stripe_over_the_second_block():
    from headlab.analysis.lm_heads import repeated_stripe_score_sums

    torch.manual_seed(3)
    half, batch = 5, 3
    pattern = torch.rand(batch, 2, 11, 11).tril().softmax(-1)
    stripe = pattern.diagonal(offset=1 - half, dim1=-2, dim2=-1)  # the demo's induction_score_hook: queries 4..10
    expected = stripe[..., -half:].mean(-1).sum(0)  # its last `half` entries: the second block's queries 6..10
    by_loop = torch.zeros(2, dtype=torch.float64)
    for b in range(batch):
        for h in range(2):
            by_loop[h] += sum(float(pattern[b, h, i, i - half + 1]) for i in range(half + 1, 2 * half + 1)) / half
    torch.testing.assert_close(repeated_stripe_score_sums(pattern, half), expected.double())
    torch.testing.assert_close(repeated_stripe_score_sums(pattern, half), by_loop)
    with pytest.raises(DataError, match="1 \\+ 2 \\* half_len = 11"):
        repeated_stripe_score_sums(pattern[..., :10, :10], half)


def test_icl_differences_per_sequence_and_their_standard_error():
    from scipy import stats

    from headlab.analysis.lm_heads import icl_differences

    losses = torch.tensor([[4.0, 3.0, 1.0], [4.0, 3.5, 0.5], [5.0, 4.0, 2.5]])
    differences = icl_differences(losses, late=2, early=0)
    assert differences.tolist() == [-3.0, -3.5, -2.5]
    assert differences.mean().item() == pytest.approx(icl_score(losses, late=2, early=0))
    assert float(stats.sem(differences.numpy())) == pytest.approx(0.5 / 3**0.5)  # sd 0.5 over 3 sequences
    with pytest.raises(DataError, match="early"):
        icl_differences(losses, late=0, early=2)


def test_causal_entropy_is_one_for_uniform_zero_for_one_key_and_scipy_for_the_rest():
    import math

    from scipy.stats import entropy

    from headlab.analysis.lm_heads import causal_entropy_norm_sums

    n = 7
    uniform = torch.ones(n, n, dtype=torch.float64).tril()
    uniform = uniform / uniform.sum(-1, keepdim=True)
    previous = _one_hot([0] + list(range(n - 1)))[0, 0]
    torch.manual_seed(0)
    random = torch.rand(n, n, dtype=torch.float64).tril()
    random = random / random.sum(-1, keepdim=True)
    sums = causal_entropy_norm_sums(torch.stack([uniform, previous.double(), random])[None].repeat(2, 1, 1, 1))  # 2 sequences
    # query i sees keys 0..i: scipy's entropy of each row over those keys, / log(i + 1), mean over queries 1..n-1
    by_hand = sum(entropy(random[i, : i + 1].numpy()) / math.log(i + 1) for i in range(1, n)) / (n - 1)
    assert sums.tolist() == pytest.approx([2.0, 0.0, 2 * by_hand], abs=1e-9)  # summed over the 2 sequences
    with pytest.raises(DataError):
        causal_entropy_norm_sums(torch.ones(1, 1, 3, 4))
