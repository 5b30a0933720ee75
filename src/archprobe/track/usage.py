"""Usage snapshots from inference servers' Prometheus /metrics (vLLM, SGLang)."""

from __future__ import annotations

import math

from archprobe.errors import SourceError
from archprobe.formats.limits import MAX_METRICS_BYTES as MAX_BYTES
from archprobe.formats.limits import MAX_METRICS_SERIES as MAX_SERIES

PREFIXES = ("vllm:", "sglang:")
GAUGES = {"vllm:num_requests_running", "vllm:num_requests_waiting", "sglang:num_running_reqs",
          "sglang:num_queue_reqs"}


def scrape(url: str, timeout_s: float = 10.0) -> list[tuple[str, float, dict]]:
    """(metric, value, labels) for every request/token counter and load gauge, summed over label sets
    other than the served model name."""
    from prometheus_client.parser import text_string_to_metric_families

    from archprobe.formats.http import GuardedHTTP, TransientError
    from archprobe.formats.limits import Deadline, cap

    hint = "the server's /metrics URL, e.g. http://host:8000/metrics"
    try:
        resp = GuardedHTTP(Deadline(min(timeout_s, cap("DEADLINE_S")), "scraping metrics")).get(url, MAX_BYTES)
    except TransientError as exc:
        raise SourceError(f"cannot scrape metrics: {exc.message}", hint=hint) from None
    except SourceError as exc:
        raise SourceError(f"cannot scrape metrics: {exc.message}", hint=exc.hint or hint) from None
    if resp.status != 200:
        raise SourceError(f"{_show(url)}: cannot scrape metrics (HTTP {resp.status})", hint=hint)
    text = resp.body.decode("utf-8", "replace")
    totals: dict[tuple[str, str], float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                name = sample.name
                if not name.startswith(PREFIXES) or not (name.endswith("_total") or name in GAUGES):
                    continue
                value = float(sample.value)
                if not math.isfinite(value) or value < 0:   # a NaN or negative counter is no usage number
                    continue
                model = str(sample.labels.get("model_name", ""))[:200]
                totals[(name, model)] = total = totals.get((name, model), 0.0) + value
                if not math.isfinite(total):
                    raise SourceError(f"{_show(url)}: {name[:80]} sums past the largest number; refused")
                if len(totals) > MAX_SERIES:
                    raise SourceError(f"{_show(url)}: over {MAX_SERIES:,} metric series; refused")
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise SourceError(f"{_show(url)}: not Prometheus text format ({str(exc)[:120]})") from None
    if not totals:
        raise SourceError(f"{_show(url)}: no vLLM or SGLang request/token metrics found",
                          hint="point at an inference server's /metrics endpoint")
    return [(name, value, {"model_name": model} if model else {}) for (name, model), value in sorted(totals.items())]


def _show(url: str) -> str:
    from archprobe.formats.http import shown_url as show

    return show(url)
