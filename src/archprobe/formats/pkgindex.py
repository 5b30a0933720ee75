"""A project's release files from a Python package index: PEP 691 JSON, PEP 503 HTML, or the JSON API.

The simple index is asked for JSON first (`Accept: application/vnd.pypi.simple.v1+json`, HTML as the
fallback the server may choose); an index that has no simple page for the project but serves the
`/pypi/<project>/json` API (PyPI, devpi) is read through that. Only wheels are kept (a wheel is a zip
that can be read by Range; an sdist is a tar.gz that cannot). Every page is capped
(MAX_PACKAGE_INDEX_BYTES) and parsed with the JSON cost guard.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

from archprobe.errors import SourceError
from archprobe.formats.http import GuardedHTTP, shown_url
from archprobe.formats.limits import cap

DEFAULT_INDEX = "https://pypi.org/simple"
ACCEPT = ("application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
          "text/html;q=0.01")
SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    version: str
    sha256: str | None
    size: int | None
    yanked: bool


def index_url(explicit: str | None = None) -> str:
    """--index-url, else PIP_INDEX_URL, else the public index."""
    return (explicit or os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX).rstrip("/")


def normalize(project: str) -> str:
    """PEP 503 name normalization."""
    return re.sub(r"[-_.]+", "-", project).lower()


def project_files(http: GuardedHTTP, base: str, project: str) -> list[IndexFile]:
    """Every wheel the index lists for `project` (yanked ones flagged)."""
    name = normalize(project)
    url = f"{base}/{name}/"
    resp = http.get(url, int(cap("MAX_PACKAGE_INDEX_BYTES")))
    if resp.status == 404 and base.endswith("/simple"):
        api = f"{base[: -len('/simple')]}/pypi/{name}/json"
        alt = http.get(api, int(cap("MAX_PACKAGE_INDEX_BYTES")))
        if alt.status == 200:
            return _from_json_api(alt.body, alt.url, project)
    if resp.status == 404:
        return []
    if resp.status != 200:
        raise SourceError(f"{shown_url(url)}: the package index answered HTTP {resp.status}")
    kind = resp.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind.endswith("+json") or kind == "application/json":
        return _from_simple_json(resp.body, resp.url, project)
    return _from_html(resp.body, resp.url, project)


def _load(body: bytes, where: str, what: str) -> dict:
    from archprobe.formats.jsontext import load_fast

    try:
        doc = load_fast(body, where, what, int(cap("MAX_PACKAGE_INDEX_BYTES")))
    except SourceError:
        raise
    except Exception as exc:
        raise SourceError(getattr(exc, "message", None) or f"{where}: {what} is not valid JSON") from None
    if not isinstance(doc, dict):
        raise SourceError(f"{where}: {what} is not a JSON object")
    return doc


def _from_simple_json(body: bytes, url: str, project: str) -> list[IndexFile]:
    doc = _load(body, shown_url(url), f"the index page of {project}")
    files = doc.get("files")
    if not isinstance(files, list):
        raise SourceError(f"{shown_url(url)}: the index page of {project} has no 'files' list (PEP 691)")
    _count(files, url)
    return _rows(files, url, "hashes")


def _from_json_api(body: bytes, url: str, project: str) -> list[IndexFile]:
    doc = _load(body, shown_url(url), f"the JSON API answer for {project}")
    releases = doc.get("releases")
    if not isinstance(releases, dict):
        raise SourceError(f"{shown_url(url)}: the JSON API answer for {project} has no 'releases'")
    out = []
    for files in releases.values():
        if not isinstance(files, list):
            continue
        _count(out + files, url)
        out += _rows(files, url, "digests")
    return out


def _rows(files: list, url: str, digests: str) -> list[IndexFile]:
    """The wheels of one JSON file list; `digests` names its hash table ("hashes" in PEP 691, "digests" in the
    JSON API)."""
    out = []
    for f in files:
        if not isinstance(f, dict):
            continue
        hashes = f.get(digests) if isinstance(f.get(digests), dict) else {}
        size = f.get("size") if isinstance(f.get("size"), int) and not isinstance(f.get("size"), bool) else None
        row = _file(f.get("filename"), f.get("url"), url, hashes.get("sha256"), size, bool(f.get("yanked")))
        if row is not None:
            out.append(row)
    return out


class _Anchors(HTMLParser):
    def __init__(self, limit: int):
        super().__init__()
        self.rows: list[tuple[str, str, bool]] = []
        self.limit = limit
        self._href: str | None = None
        self._yanked = False
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            a = dict(attrs)
            self._href, self._yanked, self._text = a.get("href"), "data-yanked" in a, []

    def handle_data(self, data):
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.rows.append((self._href, "".join(self._text).strip(), self._yanked))
            self._href = None
            if len(self.rows) > self.limit:
                raise SourceError(f"over {self.limit:,} files listed for one project; refused")


def _from_html(body: bytes, url: str, project: str) -> list[IndexFile]:
    parser = _Anchors(int(cap("MAX_PACKAGE_FILES")))
    try:
        parser.feed(body.decode("utf-8", "replace"))
    except SourceError as exc:
        raise SourceError(f"{shown_url(url)}: {exc.message}") from None
    out = []
    for href, text, yanked in parser.rows:
        link, _, fragment = href.partition("#")
        digest = fragment[len("sha256="):] if fragment.startswith("sha256=") else None
        filename = text or urlsplit(link).path.rsplit("/", 1)[-1]
        row = _file(filename, link, url, digest, None, yanked)
        if row is not None:
            out.append(row)
    return out


def _count(files: list, url: str) -> None:
    if len(files) > cap("MAX_PACKAGE_FILES"):
        raise SourceError(f"{shown_url(url)}: over {cap('MAX_PACKAGE_FILES'):,} files listed for one project; refused")


def _file(filename, link, page_url: str, sha256, size, yanked: bool) -> IndexFile | None:
    if not isinstance(filename, str) or not isinstance(link, str) or not filename.endswith(".whl"):
        return None
    parts = filename[:-4].split("-")
    if len(parts) not in (5, 6) or len(filename) > 300:
        return None
    full = urljoin(page_url, link)
    if urlsplit(full).scheme not in ("http", "https"):
        return None
    digest = sha256.lower() if isinstance(sha256, str) and SHA256.match(sha256.lower()) else None
    return IndexFile(filename, full, parts[1], digest, size if size is None or size > 0 else None, yanked)


def wheel_tags(filename: str) -> tuple[str, str, str]:
    """(python, abi, platform) tags of a wheel file name."""
    parts = filename[:-4].split("-")
    return parts[-3], parts[-2], parts[-1]
