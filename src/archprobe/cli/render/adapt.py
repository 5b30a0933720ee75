"""Terminal rendering of the adapt document: frameworks, the feature matrix, releases, upstream work."""

from __future__ import annotations

STYLE = {"supported": "green", "handled": "green", "missing": "red", "unverified": "yellow", "unknown": "red",
         "not installed": "dim", "architecture known but feature missing": "yellow",
         "architecture known, features unverified": "yellow"}


def render_adapt(doc: dict) -> None:
    from rich.table import Table

    from archprobe.cli.textsafe import SafeConsole, line, styled

    c = SafeConsole()
    declared = doc.get("wrapper_model_type") or doc["model_type"]
    c.print(line((declared, "bold"), f" ({', '.join(doc['architectures'] or [])}) — {len(doc['features'])} "
                                     "detected features"))
    t = Table("framework", "version", "status", "known as", "missing")
    for r in doc["frameworks"]:
        st = r["status"]
        t.add_row(r["framework"], r["version"] or "", styled(st, STYLE.get(st, "white")), r["known_as"] or "",
                  ", ".join(r["missing"]))
    c.print(t)
    installed = [r for r in doc["frameworks"] if r["installed"] and r["features"]]
    if installed:
        m = Table("feature", *[r["framework"] for r in installed])
        for fid in doc["features"]:
            m.add_row(fid, *[styled(s, STYLE.get(s, "white")) for s in
                             (doc["matrix"][fid][r["framework"]] for r in installed)])
        c.print(m)
    for r in doc["frameworks"]:
        for row in r["features"]:
            if row["status"] != "handled":
                c.print(f"  {r['framework']}: {row['feature']} {row['status']}: {row['why']}")
        for note in r["notes"]:
            c.print(styled(f"  {r['framework']}: {note}", "dim"))
    render_releases(c, doc)
    c.print(styled(doc["note"], "dim"))


def render_releases(c, doc: dict) -> None:
    """Per framework: releases x status x features, the first release that knows it, and upstream work."""
    from rich.table import Table

    from archprobe.cli.textsafe import styled

    for r in doc["frameworks"]:
        rel = r.get("releases") or []
        if rel:
            t = Table(f"{r['framework']} release", "status", "known as", "features handled", "missing", "bytes read",
                      title=f"{r['framework']}: first release that knows it: {r.get('first_release_known') or 'none'}")
            for x in rel:
                share = f"{x['bytes_fetched']:,}" + (f" of {x['file_bytes']:,}" if x["file_bytes"] else "")
                total = len(x["handled"]) + len(x["missing"]) + len(x["unverified"])
                t.add_row(x["version"], x["status"], x["known_as"] or "", f"{len(x['handled'])} of {total}",
                          ", ".join(x["missing"]), share)
            c.print(t)
        for u in (r.get("upstream") or [])[:10]:
            state = "merged" if u["merged"] else ("draft" if u["draft"] and u["state"] == "open" else u["state"])
            c.print(styled(f"  {u['repo']}#{u['number']} {u['kind']} {state} {u['updated_at'][:10]}: {u['title']}",
                           "dim"))
