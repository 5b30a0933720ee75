"""`eval audit CLAIM`: read a claim written down from someone else's post and apply the nine checks."""

from __future__ import annotations

from pathlib import Path

from archprobe.errors import ArchprobeError
from archprobe.eval.checks import evidence_from_claim, failing, nine_checks, verdict

SCHEMA = "archprobe.eval-audit/1"


def audit_file(path: str | Path) -> dict:
    """A claim (YAML or JSON, an eval report, an export) read through formats/structured.py (capped,
    strict, alias bombs refused)."""
    from archprobe.formats import structured

    path = Path(path)
    if not path.exists():
        raise ArchprobeError(f"{path}: no such claim file")
    if path.suffix == ".json":
        doc = structured.load_json(str(path), "the claim", want=None)
    else:
        doc = structured.load_yaml(str(path), "the claim")
    if not isinstance(doc, dict):
        raise ArchprobeError(f"{path}: a claim is a mapping, got {type(doc).__name__}")
    return audit_claim(doc, str(path))


def audit_claim(doc: dict, where: str = "claim") -> dict:
    if isinstance(doc, dict) and doc.get("schema") == "archprobe.eval-chain/1":
        return _audit_export(doc)
    checks = nine_checks(evidence_from_claim(doc, where))
    v = verdict(checks)
    reasons = [f"{k} {checks[k]['status']}: {checks[k]['evidence']}" for k in failing(checks)]
    chain = doc.get("chain") if isinstance(doc.get("chain"), dict) else None
    if chain is not None and chain.get("ok") is not True:
        # a report whose ledger chain is broken is not evidence of anything until the rows are explained
        v = "methodological_lead"
        reasons.append(f"the ledger's hash chain is broken at {len(chain.get('breaks') or [])} place(s)")
    return {"schema": SCHEMA, "claim": doc.get("claim") or doc.get("run_id"), "source": doc.get("source"),
            "checks": checks, "verdict": v, "failing": failing(checks), "reasons": reasons,
            "chain_ok": None if chain is None else chain.get("ok") is True}


def _audit_export(doc: dict) -> dict:
    """An exported run (`eval export`): its chain is checked here, then its rows are audited as a run."""
    import tempfile
    from pathlib import Path

    from archprobe.eval.ledger import Ledger, verify_export
    from archprobe.eval.report import build_report

    state = verify_export(doc)["runs"][0]
    with tempfile.TemporaryDirectory() as tmp:
        book = Ledger(Path(tmp) / "imported.sqlite")
        book.import_rows(doc)
        report = build_report(book, doc["run_id"])
        book.close()
    report["chain"] = {"ok": state["ok"], "head": state["head"], "rows": state["rows"], "breaks": state["breaks"]}
    out = audit_claim(report, doc["run_id"])
    out["chain_breaks"] = state["breaks"]
    return out
