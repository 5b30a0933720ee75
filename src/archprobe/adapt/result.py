"""The per-framework result and how its status follows from the feature rows."""

from __future__ import annotations

from archprobe.adapt.coverage import HANDLED, MISSING, UNVERIFIED

SUPPORTED = "supported"
FEATURE_MISSING = "architecture known but feature missing"
FEATURES_UNVERIFIED = "architecture known, features unverified"
UNKNOWN = "unknown"
NOT_INSTALLED = "not installed"


def framework_result(name: str, version: str | None, known_as: str | None, rows: list[dict],
                     notes: list[str]) -> dict:
    missing = [r["feature"] for r in rows if r["status"] == MISSING]
    unverified = [r["feature"] for r in rows if r["status"] == UNVERIFIED]
    if known_as is None:
        status = UNKNOWN
    elif missing:
        status = FEATURE_MISSING
    elif unverified:
        status = FEATURES_UNVERIFIED
    else:
        status = SUPPORTED
    return {"framework": name, "installed": True, "version": version, "status": status, "known_as": known_as,
            "missing": missing, "unverified": unverified,
            "handled": [r["feature"] for r in rows if r["status"] == HANDLED], "features": rows, "notes": notes}


def not_installed(name: str, how: str) -> dict:
    return {"framework": name, "installed": False, "version": None, "status": NOT_INSTALLED, "known_as": None,
            "missing": [], "unverified": [], "handled": [], "features": [], "notes": [f"install it to check: {how}"]}


def unknown(name: str, version: str | None, why: str) -> dict:
    return {"framework": name, "installed": True, "version": version, "status": UNKNOWN, "known_as": None,
            "missing": [], "unverified": [], "handled": [], "features": [], "notes": [why]}
