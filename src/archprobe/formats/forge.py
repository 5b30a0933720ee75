"""Pull requests and issues from a forge's REST API (GitHub's `/search/issues` and its answer format).

`GITHUB_API_URL` (default the public API) and an optional `GITHUB_TOKEN`. Pages are followed through the
`Link: <...>; rel="next"` header, on the same host only, at most MAX_FORGE_PAGES of them. A rate limit
(403/429 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset`, or `Retry-After`) is waited out when it
resets within FORGE_MAX_WAIT_S; otherwise the search stops, keeps what it read, and says when to retry.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from urllib.parse import quote, urlsplit

from archprobe.errors import SourceError
from archprobe.formats.http import GuardedHTTP, shown_url
from archprobe.formats.limits import MAX_PULL_LOOKUPS, MAX_TERMS, MAX_TITLE, cap

DEFAULT_API = "https://api.github.com"
LINK = re.compile(r'<([^<>\s]+)>\s*;\s*rel="?([a-z ]+)"?')


@dataclass
class SearchResult:
    items: list[dict] = field(default_factory=list)
    stopped: str | None = None    # why the search ended early (rate limit, page cap), or None
    waited_s: float = 0.0
    pages: int = 0


def api_url(explicit: str | None = None) -> str:
    return (explicit or os.environ.get("GITHUB_API_URL") or DEFAULT_API).rstrip("/")


def forge_headers() -> dict[str, str]:
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
               "User-Agent": "archprobe"}
    token = os.environ.get("GITHUB_TOKEN")
    if token and all(33 <= ord(c) < 127 for c in token):
        headers["Authorization"] = f"Bearer {token}"
    return headers


def search_query(repo: str, terms: list[str]) -> str:
    words = []
    for t in terms:
        t = t.replace('"', "").strip()
        if t and t not in words:
            words.append(t)
    return f"repo:{repo} " + " OR ".join(f'"{w}"' for w in words[:MAX_TERMS])


def search(http: GuardedHTTP, base: str, repo: str, terms: list[str], clock=time.time,
           sleep=time.sleep) -> SearchResult:
    """PRs and issues in `repo` that name any of `terms`, newest update first."""
    result = SearchResult()
    url = f"{base}/search/issues?q={quote(search_query(repo, terms))}&sort=updated&order=desc&per_page=100"
    origin = urlsplit(url)[:2]
    seen: set[int] = set()
    waits = 0
    while url:
        if result.pages >= cap("MAX_FORGE_PAGES"):
            result.stopped = (f"stopped after {result.pages} pages of results (MAX_FORGE_PAGES); "
                              f"{len(result.items)} kept")
            break
        resp = http.get(url, int(cap("MAX_FORGE_BYTES")))
        if resp.status in (403, 429):
            wait = _rate_limit_wait(resp.headers, clock())
            if wait is None:
                raise SourceError(f"{shown_url(url)}: the forge answered HTTP {resp.status} ({_message(resp.body)})",
                                  hint="set GITHUB_TOKEN to a token with read access")
            waits += 1
            if waits > 3 or wait > cap("FORGE_MAX_WAIT_S") or wait > http.deadline.left():
                at = datetime.fromtimestamp(clock() + wait, timezone.utc).strftime("%H:%M:%S UTC")
                result.stopped = (f"rate-limited by {urlsplit(base).netloc}: retry after {at} (in {wait:.0f} s); "
                                  f"{len(result.items)} result(s) read so far are kept")
                break
            sleep(max(0.0, wait))
            result.waited_s += max(0.0, wait)
            continue
        if resp.status == 422:
            raise SourceError(f"{shown_url(url)}: the forge refused the search ({_message(resp.body)})")
        if resp.status != 200:
            raise SourceError(f"{shown_url(url)}: the forge answered HTTP {resp.status}")
        result.pages += 1
        for item in _items(resp.body, url):
            if item["number"] not in seen:
                seen.add(item["number"])
                result.items.append(item)
        url = _next_link(resp.headers.get("link", ""), origin)
    _settle_merged(http, base, repo, result)
    return result




def _settle_merged(http: GuardedHTTP, base: str, repo: str, result: SearchResult) -> None:
    """A closed PR whose search hit carries no `pull_request.merged_at` (older API answers): ask the pull
    itself (`GET /repos/{repo}/pulls/{n}`, its `merged` field), at most MAX_PULL_LOOKUPS times."""
    unsure = [it for it in result.items if it.pop("_merged_unknown", False)]
    for it in unsure[:MAX_PULL_LOOKUPS]:
        if result.stopped:
            break
        from archprobe.formats.jsontext import load_fast

        url = f"{base}/repos/{repo}/pulls/{it['number']}"
        resp = http.get(url, int(cap("MAX_FORGE_BYTES")))
        if resp.status != 200:
            continue
        try:
            pull = load_fast(resp.body, shown_url(url), "the forge's pull request", int(cap("MAX_FORGE_BYTES")))
        except Exception as exc:
            raise SourceError(getattr(exc, "message", None) or f"{shown_url(url)}: not JSON") from None
        it["merged"] = pull.get("merged") is True or bool(pull.get("merged_at"))
    for it in result.items:
        it.pop("_merged_unknown", None)


def _rate_limit_wait(headers: dict[str, str], now: float) -> float | None:
    """Seconds until the limit lifts, or None when the answer is not a rate limit."""
    retry = headers.get("retry-after", "").strip()
    if retry.isdigit():
        return float(retry)
    if headers.get("x-ratelimit-remaining", "").strip() == "0":
        reset = headers.get("x-ratelimit-reset", "").strip()
        if reset.isdigit():
            return max(0.0, float(reset) - now) + 1.0   # the reset second itself may still be limited
        return 60.0
    return None


def _next_link(header: str, origin: tuple) -> str | None:
    for target, rels in LINK.findall(header[:8192]):
        if "next" in rels.split():
            if urlsplit(target)[:2] != origin:   # never carry the token to another host
                raise SourceError(f"the forge's next page points at another host ({shown_url(target)}); refused")
            return target
    return None


def _message(body: bytes) -> str:
    text = body[:2000].decode("utf-8", "replace")
    m = re.search(r'"message"\s*:\s*"([^"]{0,200})', text)
    return m.group(1) if m else text[:120]


def _items(body: bytes, url: str) -> list[dict]:
    from archprobe.formats.jsontext import load_fast

    try:
        doc = load_fast(body, shown_url(url), "the forge's search answer", int(cap("MAX_FORGE_BYTES")))
    except Exception as exc:
        raise SourceError(getattr(exc, "message", None) or f"{shown_url(url)}: not JSON") from None
    items = doc.get("items")
    if not isinstance(items, list):
        raise SourceError(f"{shown_url(url)}: the forge's search answer has no 'items' list")
    out = []
    for it in items:
        row = _item(it)
        if row is not None:
            out.append(row)
    return out


def _item(it) -> dict | None:
    """One search hit in the contract's shape; anything malformed is skipped."""
    if not isinstance(it, dict) or not isinstance(it.get("number"), int) or isinstance(it.get("number"), bool):
        return None
    pr = it.get("pull_request") if isinstance(it.get("pull_request"), dict) else None
    state = it.get("state") if it.get("state") in ("open", "closed") else "closed"
    labels = [str(lab.get("name"))[:100] for lab in it.get("labels") or [] if isinstance(lab, dict)
              and isinstance(lab.get("name"), str)][:20] if isinstance(it.get("labels"), list) else []
    merged = bool(pr and isinstance(pr.get("merged_at"), str) and pr.get("merged_at"))
    unknown = pr is not None and "merged_at" not in pr and state == "closed"
    return {**({"_merged_unknown": True} if unknown else {}),
            "number": it["number"], "kind": "pr" if pr is not None else "issue",
            "title": str(it.get("title") or "")[:MAX_TITLE], "state": state,
            "draft": bool(it.get("draft")) if pr is not None else False, "merged": merged,
            "updated_at": str(it.get("updated_at") or "")[:40], "labels": labels,
            "url": str(it.get("html_url") or "")[:300]}
