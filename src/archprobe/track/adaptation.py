"""Adaptation snapshots: what `adapt`'s ecosystem view says, as ledger rows of their own kind.

Per framework release read: `registered` (1 when that release's registry has the checkpoint's own
architecture, else 0; its status and entry as labels) and `features_handled`; per framework:
`releases_knowing` and the upstream counts (open / draft / merged pull requests, open issues). Stored
under kind "adaptation", never combined with reach or usage (track/signals.py says why).
"""

from __future__ import annotations


def adaptation_rows(doc: dict) -> list[tuple[str, float, dict]]:
    """(metric, value, labels) rows from an adapt document with releases."""
    rows: list[tuple[str, float, dict]] = []
    for f in doc["frameworks"]:
        name = f["framework"]
        releases = f.get("releases") or []
        known = 0
        for r in releases:
            knows = 1.0 if _knows(r) else 0.0
            known += int(knows)
            rows.append(("registered", knows, {"framework": name, "version": r["version"], "status": r["status"],
                                               "known_as": r["known_as"] or ""}))
            rows.append(("features_handled", float(len(r["handled"])), {"framework": name, "version": r["version"]}))
        if releases:
            rows.append(("releases_knowing", float(known), {"framework": name}))
        if "upstream" in f:
            up = f["upstream"]
            prs = [u for u in up if u["kind"] == "pr"]
            for metric, value in (("upstream_open_prs", sum(u["state"] == "open" and not u["draft"] for u in prs)),
                                  ("upstream_draft_prs", sum(u["state"] == "open" and u["draft"] for u in prs)),
                                  ("upstream_merged_prs", sum(u["merged"] for u in prs)),
                                  ("upstream_open_issues", sum(u["kind"] == "issue" and u["state"] == "open"
                                                               for u in up))):
                rows.append((metric, float(value), {"framework": name}))
    return rows


def _knows(release: dict) -> bool:
    return release["status"] == "registered"
