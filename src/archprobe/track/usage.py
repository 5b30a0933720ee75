"""Usage snapshots from inference servers' Prometheus /metrics (vLLM, SGLang)."""

from __future__ import annotations

import urllib.error
import urllib.request

from archprobe.errors import SourceError

PREFIXES = ("vllm:", "sglang:")
GAUGES = {"vllm:num_requests_running", "vllm:num_requests_waiting", "sglang:num_running_reqs",
          "sglang:num_queue_reqs"}
MAX_BYTES = 16 * 1024 * 1024


def scrape(url: str, timeout_s: float = 10.0) -> list[tuple[str, float, dict]]:
    """(metric, value, labels) for every request/token counter and load gauge, summed over label sets
    other than the served model name."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 (a URL the user gave)
            text = resp.read(MAX_BYTES).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise SourceError(f"{url}: cannot scrape metrics ({exc})", hint="the server's /metrics URL, "
                          "e.g. http://host:8000/metrics") from None
    totals: dict[tuple[str, str], float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                name = sample.name
                if not name.startswith(PREFIXES) or not (name.endswith("_total") or name in GAUGES):
                    continue
                model = sample.labels.get("model_name", "")
                totals[(name, model)] = totals.get((name, model), 0.0) + float(sample.value)
    except ValueError as exc:
        raise SourceError(f"{url}: not Prometheus text format ({exc})") from None
    if not totals:
        raise SourceError(f"{url}: no vLLM or SGLang request/token metrics found",
                          hint="point at an inference server's /metrics endpoint")
    return [(name, value, {"model_name": model} if model else {}) for (name, model), value in sorted(totals.items())]
