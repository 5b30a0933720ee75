import math

import numpy as np
import pytest

from archprobe.eval import stats


def wilson_closed_form(k, n, z=1.959963984540054):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


@pytest.mark.parametrize("k,n", [(0, 5), (1, 1), (7, 10), (38, 40), (50, 100)])
def test_wilson_matches_the_closed_form(k, n):
    lo, hi = wilson_closed_form(k, n)
    got = stats.wilson(k, n)
    assert got.rate == k / n
    assert got.low == pytest.approx(lo, abs=1e-12) and got.high == pytest.approx(hi, abs=1e-12)


def test_wilson_for_one_success_in_one_try_is_wide():
    w = stats.wilson(1, 1)
    assert w.low < 0.25 and w.high == 1.0


def test_clustered_se_from_its_definition():
    per_task = [(5, 5), (0, 5), (3, 5), (4, 5)]
    y = [[1] * p + [0] * (n - p) for p, n in per_task]
    flat = np.concatenate(y)
    rate = flat.mean()
    c = len(y)
    se = math.sqrt(c / (c - 1) * sum(sum(v - rate for v in ys) ** 2 for ys in y)) / len(flat)
    got = stats.clustered(per_task)
    assert got.rate == pytest.approx(12 / 20)
    assert got.low == pytest.approx(rate - 1.959963984540054 * se)
    assert got.high == pytest.approx(min(1.0, rate + 1.959963984540054 * se))  # clipped to [0, 1]
    # clustering widens the interval against treating 20 attempts as independent
    assert got.high - got.low > stats.wilson(12, 20).high - stats.wilson(12, 20).low


def test_bootstrap_over_tasks_brackets_the_rate_and_is_seeded():
    per_task = [(5, 5), (0, 5), (3, 5), (4, 5), (2, 5)]
    a, b = stats.bootstrap(per_task, seed=3), stats.bootstrap(per_task, seed=3)
    assert a == b
    assert a.low < a.rate < a.high


def test_pass_at_k_and_pass_hat_k():
    assert stats.pass_at_k(5, 1, 1) == pytest.approx(0.2)
    assert stats.pass_at_k(5, 1, 5) == 1.0
    assert stats.pass_at_k(5, 0, 3) == 0.0
    assert stats.pass_at_k(10, 3, 2) == pytest.approx(1 - (7 * 6) / (10 * 9))
    assert stats.pass_hat_k(5, 5, 3) == 1.0
    assert stats.pass_hat_k(10, 3, 2) == pytest.approx((3 * 2) / (10 * 9))
    with pytest.raises(ValueError):
        stats.pass_at_k(2, 1, 3)


def test_paired_difference():
    a = [0.2, 0.4, 0.6, 0.8]
    b = [0.4, 0.5, 0.9, 0.8]
    p = stats.paired_difference(a, b)
    d = np.array(b) - np.array(a)
    assert p.mean_difference == pytest.approx(d.mean())
    assert p.low < p.mean_difference < p.high
    assert 0 < p.p_value < 1
