"""The report's releases section: per framework a timeline of its releases (oldest to newest, each coloured
by whether its registry knows the checkpoint) and the table of releases x card features."""

from __future__ import annotations

from archprobe.report.html import e

CELL = {"handled": "handled", "missing": "missing", "unverified": "unverified"}


def _status_class(status: str) -> str:
    if status == "registered":
        return "handled"
    if status == "not registered" or status.startswith("registry unreadable"):
        return "missing"
    return "unverified"   # wrapped text model only, transformers backend, previously supported


def releases_section(ad: dict) -> str:
    frameworks = [f for f in (ad or {}).get("frameworks", []) if f.get("releases")]
    if not frameworks:
        return ""
    parts = ["<section id=releases><h2>Released versions</h2><p class=muted>Read from the package index "
             "(wheels by HTTP Range: directory and registry files only), not from this machine.</p>"]
    for f in frameworks:
        rel = list(reversed(f["releases"]))   # oldest first: support landing release by release
        chips = "".join(f"<span class='{_status_class(r['status'])}' title='{e(r['status'])}' "
                        f"data-version='{e(r['version'])}' style='padding:2px 6px;margin:1px'>{e(r['version'])}</span>"
                        for r in rel)
        parts.append(f"<h3 id='releases-{e(f['framework'])}'>{e(f['framework'])}: first release that knows it: "
                     f"{e(f.get('first_release_known') or 'none')}</h3><p class=timeline>{chips}</p>")
        features = ad.get("features") or []
        head = "".join(f"<th>{e(fid)}</th>" for fid in features)
        rows = []
        for r in f["releases"]:
            state = {fid: "handled" for fid in r["handled"]} | {fid: "missing" for fid in r["missing"]}
            cells = "".join(f"<td class='{CELL[state.get(fid, 'unverified')]}'>{e(state.get(fid, 'unverified'))}</td>"
                            for fid in features)
            rows.append(f"<tr><td>{e(r['version'])}</td><td class='{_status_class(r['status'])}'>{e(r['status'])}"
                        f"</td><td>{e(r['known_as'] or '')}</td>{cells}</tr>")
        parts.append(f"<table><tr><th>release</th><th>status</th><th>known as</th>{head}</tr>{''.join(rows)}</table>")
        up = f.get("upstream") or []
        if up:
            items = "".join(f"<li><a href='{e(_link(u['url']))}'>{e(u['repo'])}#{u['number']}</a> {e(u['kind'])} "
                            f"{e(_state(u))} {e(u['updated_at'][:10])}: {e(u['title'])}</li>" for u in up[:20])
            parts.append(f"<ul class=upstream>{items}</ul>")
    parts.append("</section>")
    return "".join(parts)


def _state(u: dict) -> str:
    return "merged" if u["merged"] else "draft" if u["draft"] and u["state"] == "open" else u["state"]


def _link(url: str) -> str:
    """Only http(s) links from a forge's answer (a `javascript:` URL is hostile input)."""
    return url if url.startswith(("https://", "http://")) else "#"
