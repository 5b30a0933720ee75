"""Success rates with intervals, pass@k / pass^k, and paired comparisons (C2).

Methods, named in every report: Wilson score interval for a single task (scipy's binomtest);
for a task set, the cluster-robust standard error with tasks as clusters (attempts of one task are
not independent), or a bootstrap over tasks (scipy.stats.bootstrap); pass@k and pass^k with the
unbiased estimators from n attempts per task; a paired comparison of two runs over the same tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Interval:
    rate: float
    low: float
    high: float
    method: str


def wilson(passes: int, n: int) -> Interval:
    from scipy.stats import binomtest

    if n == 0:
        return Interval(float("nan"), 0.0, 1.0, "wilson (no scored attempts)")
    ci = binomtest(passes, n).proportion_ci(confidence_level=0.95, method="wilson")
    return Interval(passes / n, float(ci.low), float(ci.high), "wilson")


def clustered(per_task: list[tuple[int, int]]) -> Interval:
    """per_task: (passes, scored attempts). Cluster-robust SE of the pooled rate, normal interval."""
    tasks = [(p, n) for p, n in per_task if n > 0]
    total = sum(n for _, n in tasks)
    if total == 0:
        return Interval(float("nan"), 0.0, 1.0, "clustered (no scored attempts)")
    rate = sum(p for p, _ in tasks) / total
    c = len(tasks)
    if c < 2:
        w = wilson(tasks[0][0], tasks[0][1])
        return Interval(w.rate, w.low, w.high, "wilson")
    residual_sums = np.array([p - n * rate for p, n in tasks], dtype=float)
    se = float(np.sqrt(c / (c - 1) * np.sum(residual_sums ** 2)) / total)
    return Interval(rate, max(0.0, rate - Z95 * se), min(1.0, rate + Z95 * se), "clustered by task (normal, 95%)")


def bootstrap(per_task: list[tuple[int, int]], resamples: int = 2000, seed: int = 0) -> Interval:
    from scipy.stats import bootstrap as scipy_bootstrap

    tasks = [(p, n) for p, n in per_task if n > 0]
    if len(tasks) < 2:
        return clustered(tasks)
    passes = np.array([p for p, _ in tasks], dtype=float)
    counts = np.array([n for _, n in tasks], dtype=float)
    rate = float(passes.sum() / counts.sum())
    if np.all(passes == 0) or np.all(passes == counts):
        return Interval(rate, rate, rate, "bootstrap over tasks (degenerate: every task the same)")
    res = scipy_bootstrap((np.arange(len(tasks)),), lambda idx: passes[idx.astype(int)].sum()
                          / counts[idx.astype(int)].sum(), n_resamples=resamples, method="percentile",
                          random_state=np.random.default_rng(seed), vectorized=False)
    return Interval(rate, float(res.confidence_interval.low), float(res.confidence_interval.high),
                    f"bootstrap over tasks (percentile, {resamples} resamples)")


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k draws without replacement passes), unbiased from c passes in n."""
    from scipy.special import comb

    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} attempts, have {n}")
    return 1.0 - float(comb(n - c, k, exact=True)) / float(comb(n, k, exact=True))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: P(all k draws pass), unbiased from c passes in n."""
    from scipy.special import comb

    if k > n:
        raise ValueError(f"pass^{k} needs at least {k} attempts, have {n}")
    return float(comb(c, k, exact=True)) / float(comb(n, k, exact=True))


@dataclass(frozen=True)
class Paired:
    tasks: int
    mean_difference: float
    low: float
    high: float
    p_value: float
    method: str


def paired_difference(rates_a: list[float], rates_b: list[float]) -> Paired:
    """Per-task success rates of two runs on the same tasks: mean of (b - a), t interval, paired t-test."""
    from scipy import stats

    a, b = np.asarray(rates_a, float), np.asarray(rates_b, float)
    d = b - a
    if len(d) < 2:
        raise ValueError("a paired comparison needs at least two tasks")
    mean = float(d.mean())
    if np.allclose(d, d[0]):
        return Paired(len(d), mean, mean, mean, 1.0 if mean == 0 else 0.0, "paired t over tasks (no variance)")
    se = float(d.std(ddof=1) / np.sqrt(len(d)))
    t = float(stats.t.ppf(0.975, len(d) - 1))
    p = float(stats.ttest_rel(b, a).pvalue)
    return Paired(len(d), mean, mean - t * se, mean + t * se, p, "paired t over tasks (95%)")
