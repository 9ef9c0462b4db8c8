import numpy as np
import pytest
import torch
from scipy.linalg import subspace_angles

from headlab.analysis import (
    head_cosine,
    per_head_grad_norm,
    qk_cosine,
    random_cosine_std,
    relative_distance_from_init,
    subspace_similarity,
)
from headlab.errors import ConfigError, DataError


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def test_head_cosine_orthogonal_and_identical():
    q, _ = torch.linalg.qr(torch.randn(12, 12, generator=_gen(0), dtype=torch.float64))
    W = torch.stack([q[:, :4], q[:, 4:8], q[:, :4] * 3.0])  # [head, 12, 4]; heads 0 and 2 parallel
    cos = head_cosine(W)
    assert cos[0, 1].item() == pytest.approx(0.0, abs=1e-12)
    assert cos[0, 2].item() == pytest.approx(1.0, abs=1e-12)
    torch.testing.assert_close(cos.diagonal(), torch.ones(3, dtype=torch.float64))


def test_qk_cosine_matches_explicit_loop():
    W_Q = torch.randn(4, 10, 3, generator=_gen(1), dtype=torch.float64)
    W_K = torch.randn(4, 10, 3, generator=_gen(2), dtype=torch.float64)
    bilinear = [(W_Q[h] @ W_K[h].T).numpy().ravel() for h in range(4)]
    expected = np.array([[a @ b / np.linalg.norm(a) / np.linalg.norm(b) for b in bilinear] for a in bilinear])
    np.testing.assert_allclose(qk_cosine(W_Q, W_K).numpy(), expected, atol=1e-12)


def test_qk_cosine_sees_through_rotations():
    """W_Q R and W_K R give the same scores, so the same bilinear form: cosine 1."""
    W_Q = torch.randn(1, 8, 4, generator=_gen(3), dtype=torch.float64)
    W_K = torch.randn(1, 8, 4, generator=_gen(4), dtype=torch.float64)
    rot, _ = torch.linalg.qr(torch.randn(4, 4, generator=_gen(5), dtype=torch.float64))
    cos = qk_cosine(torch.cat([W_Q, W_Q @ rot]), torch.cat([W_K, W_K @ rot]))
    assert cos[0, 1].item() == pytest.approx(1.0, abs=1e-12)
    assert abs(head_cosine(torch.cat([W_Q, W_Q @ rot]))[0, 1].item()) < 0.99


def test_subspace_similarity_matches_scipy_principal_angles():
    W = torch.randn(4, 9, 3, generator=_gen(6), dtype=torch.float64)
    W[3] = W[0] @ torch.randn(3, 3, generator=_gen(7), dtype=torch.float64)  # same column space as head 0
    W[2, :, 2] = W[2, :, 0] + W[2, :, 1]  # rank 2
    got = subspace_similarity(W).numpy()
    expected = np.array([[np.cos(subspace_angles(a, b)).mean() for b in W.numpy()] for a in W.numpy()])
    np.testing.assert_allclose(got, expected, atol=1e-10)
    assert got[0, 3] == pytest.approx(1.0)


def test_random_heads_have_cosine_std_one_over_sqrt_d():
    for d in (16, 64):
        cos = head_cosine(torch.randn(400, d, generator=_gen(d), dtype=torch.float64))
        pairs = cos[torch.triu_indices(400, 400, offset=1).unbind()]
        assert pairs.std().item() == pytest.approx(random_cosine_std(d), rel=0.05)
        assert abs(pairs.mean().item()) < 0.01
    assert random_cosine_std(64) == 0.125


def test_relative_distance_pools_matrices_per_head():
    W0 = [
        torch.randn(3, 5, 2, generator=_gen(8), dtype=torch.float64),  # like W_Q [head, d_model, d_head]
        torch.randn(3, 2, 5, generator=_gen(9), dtype=torch.float64),  # like W_O [head, d_head, d_model]
    ]
    W = [W0[0] + 0.1, W0[1].clone()]
    W[1][1] = 0.0
    got = relative_distance_from_init(W, W0)
    for h in range(3):
        diff = np.sqrt(((W[0][h] - W0[0][h]) ** 2).sum() + ((W[1][h] - W0[1][h]) ** 2).sum())
        norm = np.sqrt((W0[0][h] ** 2).sum() + (W0[1][h] ** 2).sum())
        assert got[h].item() == pytest.approx(float(diff / norm))
    with pytest.raises(DataError):
        relative_distance_from_init(W[0], W0[0][:2])


def test_grad_norm_matches_slices_of_the_fused_linear_layers():
    """Per-head slices of nn.Linear layouts: q/k/v rows h*d_head:(h+1)*d_head, out_proj columns."""
    n_heads, d_head, d_model = 3, 2, 5
    g = _gen(10)
    grads = {k: torch.randn(n_heads * d_head, d_model, generator=g, dtype=torch.float64) for k in "qkv"}
    grad_out = torch.randn(d_model, n_heads * d_head, generator=g, dtype=torch.float64)
    # [head, d_model, d_head]
    per_head = {k: v.reshape(n_heads, d_head, d_model).transpose(1, 2) for k, v in grads.items()}
    per_head_out = grad_out.T.reshape(n_heads, d_head, d_model)  # [h, d_head, d_model]
    got = per_head_grad_norm(per_head["q"], per_head["k"], per_head["v"], per_head_out)
    for h in range(n_heads):
        rows = slice(h * d_head, (h + 1) * d_head)
        total = sum((grads[k][rows] ** 2).sum() for k in "qkv") + (grad_out[:, rows] ** 2).sum()
        assert got[h].item() == pytest.approx(total.sqrt().item())
    only_q = per_head_grad_norm(per_head["q"], None, None, None)
    torch.testing.assert_close(only_q, per_head["q"].flatten(1).norm(dim=1))
    with pytest.raises(DataError, match="backward"):
        per_head_grad_norm(None, None, None, None)


@pytest.mark.parametrize("bad", [0, -1, 2.0])
def test_random_cosine_std_rejects_bad_dimension(bad):
    with pytest.raises(ConfigError):
        random_cosine_std(bad)


def test_shape_errors():
    with pytest.raises(DataError):
        qk_cosine(torch.randn(2, 4, 3), torch.randn(2, 4, 2))
    with pytest.raises(DataError):
        subspace_similarity(torch.randn(4, 3))
