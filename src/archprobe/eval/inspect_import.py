"""Import an Inspect AI `.eval` log into the ledger, so its runs are reported and audited the same way.

The log is read with the `inspect_ai` package (no code from the log runs). Each sample epoch becomes
an attempt; Inspect's error retries become earlier attempts linked to the final one (E2). Inspect does
not record human interventions in a way we can count, so E1 is `unknown` for imported runs.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from archprobe.errors import ArchprobeError
from archprobe.eval.ledger import Ledger


def check_log(path: str | Path) -> None:
    """Within caps before inspect_ai reads it: a zip's members are inflated (and stopped at the cap) here
    first; a JSON log's size and parse cost are checked. The CLI calls it before it makes a ledger."""
    from archprobe.formats import jsontext, structured
    from archprobe.formats.limits import cap

    path = Path(path)
    if not path.exists():
        raise ArchprobeError(f"{path}: no such log file")
    if path.suffix == ".json":
        raw = structured.read_bytes(str(path), cap("MAX_STRUCTURED_BYTES"), "the Inspect log")
        jsontext.check_cost(raw, str(path), "the Inspect log", ArchprobeError)
    else:
        structured.check_zip(str(path), "the Inspect log")


def import_inspect_log(ledger: Ledger, path: str | Path, checked: bool = False) -> str:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise ArchprobeError("importing Inspect logs needs inspect_ai", hint="pip install inspect_ai") from None
    if not checked:
        check_log(path)
    path = Path(path)
    try:
        log = read_eval_log(str(path))
    except Exception as exc:
        raise ArchprobeError(f"{path}: not a readable Inspect AI log ({type(exc).__name__}: {exc})"[:400]) from None
    spec = log.eval
    run_id = f"inspect-{spec.eval_id}"
    if ledger.has_run(run_id):
        return run_id
    samples = sorted(log.samples or [], key=lambda s: (str(s.id), s.epoch))
    task_ids = sorted({str(s.id) for s in samples})
    content = {}
    for s in samples:
        content.setdefault(str(s.id), {"input": _text(s.input), "target": _text(s.target)})
    digest = hashlib.sha256(b"archprobe.inspect-task/1\0")
    digest.update(f"{spec.task}\0{spec.task_version}\0".encode())
    digest.update(json.dumps([content[t] | {"id": t} for t in task_ids], sort_keys=True).encode())
    epochs = spec.config.epochs or 1
    ledger.create_run(run_id, source="inspect_ai", task_set_hash="sha256:" + digest.hexdigest(),
                      task_set_path=str(path), model=spec.model, endpoint=spec.model_base_url or spec.model,
                      attempts_per_task=epochs, interventions_tracked=False,
                      params={"max_retries": 10**6, "sampling": _config(spec.model_generate_config),
                              "seed": getattr(spec.model_generate_config, "seed", None), "inspect_task": spec.task,
                              "inspect_status": log.status},
                      tasks=[(t, content[t]) for t in task_ids])
    for s in samples:
        prev = None
        chain = [*(s.error_retries or []), s]
        for n, attempt in enumerate(chain):
            aid = f"{run_id}/{s.id}/{s.epoch - 1}/{n}"
            ledger.start_attempt(run_id, aid, str(s.id), s.epoch - 1, n, prev, {"imported_from": str(path)})
            outcome, reason = _outcome(attempt)
            usage = next(iter((attempt.model_usage or {}).values()), None)
            ledger.record_outcome(aid, outcome, seconds=attempt.total_time,
                                  tokens_in=getattr(usage, "input_tokens", None),
                                  tokens_out=getattr(usage, "output_tokens", None), server_model=spec.model,
                                  detail={"reason": reason, "retryable": False} if reason else {"retryable": False})
            prev = aid
    return run_id


def _outcome(sample) -> tuple[str, str | None]:
    if sample.error is not None:
        return "error", f"inspect error: {str(sample.error.message)[:200]}"
    limit = getattr(sample, "limit", None)
    if limit is not None:
        kind = getattr(limit, "type", "limit")
        return ("timeout" if kind in ("time", "working") else "cancelled"), f"inspect {kind} limit"
    scores = sample.scores or {}
    if not scores:
        return "error", "no score recorded"
    value = next(iter(scores.values())).value
    if value in ("C", True) or (isinstance(value, int | float) and not isinstance(value, bool) and value >= 1):
        return "pass", None
    if value in ("I", "P", "N", False) or isinstance(value, int | float):
        return "fail", None
    return "error", f"unrecognised score value {value!r}"


def _text(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return json.dumps([getattr(m, "text", str(m)) for m in value])
    return str(value)


def _config(cfg) -> dict:
    try:
        return {k: v for k, v in cfg.model_dump().items() if v is not None}
    except AttributeError:
        return {}
