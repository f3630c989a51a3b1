"""Vertical-slash sparse attention from Python: synthetic data with a planted pattern and the estimator."""
import numpy as np
import pytest

import fulcrum

N = 8192


def fp64_scores(q_obs, k, window):
    """Independent fp64 brute force: dense causal softmax per observation row, then column and diagonal sums."""
    n, kv_heads, d = k.shape
    q_heads = q_obs.shape[1]
    rows = np.arange(n - window, n)
    keys = np.arange(n)
    out = []
    for h in range(q_heads):
        logits = q_obs[-window:, h, :].astype(np.float64) @ k[:, h // (q_heads // kv_heads), :].T.astype(np.float64)
        logits /= np.sqrt(d)
        logits[keys[None, :] > rows[:, None]] = -np.inf
        a = np.exp(logits - logits.max(axis=1, keepdims=True))
        a /= a.sum(axis=1, keepdims=True) * window
        delta = rows[:, None] - keys[None, :]
        causal = delta >= 0
        out.append((a.sum(axis=0), np.bincount(delta[causal], weights=a[causal], minlength=n), a))
    return out


def test_rows_are_a_function_of_their_coordinates():
    q, k, v, patterns = fulcrum.synthetic_attention(5, 4, 2, 32, 1000)
    q2, k2, v2, _ = fulcrum.synthetic_attention(5, 4, 2, 32, 1000, begin=300, end=400)
    assert q.shape == (1000, 4, 32) and k.shape == (1000, 2, 32) and v.dtype == np.float32
    np.testing.assert_array_equal(q[300:400], q2)
    np.testing.assert_array_equal(k[300:400], k2)
    np.testing.assert_array_equal(v[300:400], v2)
    assert len(patterns) == 4 and patterns[0].vertical_tokens[0] == 0


def test_patterns_differ_across_heads_and_samples():
    _, _, _, a = fulcrum.synthetic_attention(1, 4, 2, 64, 8192, 0, 0)
    _, _, _, b = fulcrum.synthetic_attention(2, 4, 2, 64, 8192, 0, 0)
    assert a[0].period == a[1].period  # one kv group
    assert a[0].period != a[2].period and a[0].vertical_tokens != a[2].vertical_tokens
    assert all(x.vertical_tokens != y.vertical_tokens for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("gamma", [0.9, 0.95])
def test_estimate_matches_fp64_and_finds_the_planted_pattern(gamma):
    q, k, _, patterns = fulcrum.synthetic_attention(3, 4, 2, 64, N)
    positions = np.arange(N)
    heads = fulcrum.estimate_vertical_slash(q, positions, k, positions, gamma=gamma, block=64)
    ref = fp64_scores(q, k, 64)
    for index, pattern, (vertical, slash, a) in zip(heads, patterns, ref, strict=True):
        # Recall from the fp64 matrix and the returned mask (tolerance 1e-5: fp32 logits).
        rows = np.arange(N - 64, N)[:, None] // 64
        kept = np.isin(rows - positions[None, :] // 64, index.block_offsets) | np.isin(positions, index.verticals)
        assert abs(a[kept].sum() - index.recall) < 1e-5
        assert index.recall >= gamma - 1e-9
        # The budget from the fp64 scores: the fewest top verticals reaching gamma (plus key 0).
        order = np.argsort(-vertical, kind="stable")
        count = int(np.searchsorted(np.cumsum(vertical[order]), gamma * vertical.sum()) + 1)
        assert sorted(set(order[:count].tolist()) | {0}) == index.verticals
        assert set(pattern.vertical_tokens) <= set(index.verticals)
        assert 0 in index.block_offsets and 1 - index.kept_pair_fraction(N) > 0.8
        assert slash.sum() == pytest.approx(1.0)


def test_estimate_takes_the_window_out_of_longer_query_rows():
    q, k, _, _ = fulcrum.synthetic_attention(4, 2, 1, 16, 500)
    positions = np.arange(500)
    whole = fulcrum.estimate_vertical_slash(q, positions, k, positions, block=16, window=32)
    tail = fulcrum.estimate_vertical_slash(q[-32:], positions[-32:], k, positions, block=16, window=32)
    assert [(h.verticals, h.block_offsets, h.recall) for h in whole] == [
        (h.verticals, h.block_offsets, h.recall) for h in tail]


@pytest.mark.parametrize(("kwargs", "text"), [
    ({"gamma": 0.0}, "gamma = 0"), ({"gamma": 1.2}, "gamma = 1.2: must be in (0, 1]"),
    ({"block": 0}, "block = 0: must be >= 1"), ({"window": 0}, "window = 0: must be in [1, 200]"),
    ({"cap": 8, "block": 16}, "cap = 8: must be >= block (16)"),
])
def test_bad_input_names_the_field(kwargs, text):
    q, k, _, _ = fulcrum.synthetic_attention(4, 2, 1, 16, 200)
    positions = np.arange(200)
    with pytest.raises(fulcrum.InputError, match=text.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        fulcrum.estimate_vertical_slash(q, positions, k, positions, **kwargs)
    with pytest.raises(fulcrum.InputError, match="obs_positions"):
        fulcrum.estimate_vertical_slash(q[:10], positions[:10], k, positions)
    with pytest.raises(fulcrum.InputError, match="head_dim = 7"):
        fulcrum.synthetic_attention(1, 2, 1, 7, 100)
