"""Hub sources: list the repo, then fetch only header bytes of each shard with HTTP Range requests.

safetensors shards by default; a repo without them (or a source with `:TAG`) is read as one GGUF model,
its header read front to back in growing Range blocks (formats/gguf.py).

Per shard: `Range: bytes=0-7` (the header length), then exactly the header. Shards are fetched in
parallel threads. When the listing already names a complete numbered shard set
(`model-00001-of-000096.safetensors` ...), model.safetensors.index.json is not fetched (K3's is 58 MB,
and every shard header is read anyway). 429 and 5xx are retried with exponential backoff (honouring
Retry-After) within the command's deadline; 401/403 (gated or private) and 404 become one clear message.
`HF_ENDPOINT` and `HF_TOKEN` are honoured. Every request goes through formats/http.py (caps, deadlines,
Range checks); every path from the listing must stay inside the repo.
"""

from __future__ import annotations

import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import quote

from archprobe.errors import CheckpointError, SourceError
from archprobe.formats.checkpoint import (
    PICKLE_SUFFIXES,
    HeaderTotals,
    Progress,
    RawCheckpoint,
    check_distinct,
    numbered_shards,
    parse_config_bytes,
    parse_index_bytes,
    shard_names_from_index,
)
from archprobe.formats.http import GuardedHTTP, TransientError
from archprobe.formats.limits import Deadline, cap
from archprobe.formats.safetensors import Header, header_length, parse_header

RETRIES = 5
BACKOFF_S = 0.25
PARALLEL = 16
INDEX = "model.safetensors.index.json"
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


def endpoint() -> str:
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def auth_headers() -> dict[str, str]:
    from huggingface_hub.utils import build_hf_headers

    return build_hf_headers(token=os.environ.get("HF_TOKEN") or None)


def repo_path_problem(path) -> str | None:
    """Why a path from a listing (or a repo id / revision) would leave the repo (None when it stays in)."""
    if not isinstance(path, str) or not path or len(path) > 1024:
        return "not a path"
    if path.startswith("/") or "\\" in path or "\0" in path or any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "absolute, or has a backslash or control characters"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "has an empty, '.' or '..' component"
    return None


def check_repo_id(repo_id: str, revision: str) -> None:
    for what, value in (("repo id", repo_id), ("revision", revision)):
        problem = repo_path_problem(value)
        if problem:
            raise SourceError(f"{what} {value[:80]!r}: {problem}")


class HubReader:
    """Byte-counting, retrying HTTP reads of one repo at one revision, within one deadline."""

    def __init__(self, repo_id: str, revision: str, deadline: Deadline | None = None):
        check_repo_id(repo_id, revision)
        self.repo_id = repo_id
        self.revision = revision
        self.endpoint = endpoint()
        self.deadline = deadline or Deadline()
        self.http = GuardedHTTP(self.deadline, auth_headers())

    @property
    def bytes_read(self) -> int:
        return self.http.bytes_read

    def url(self, filename: str) -> str:
        return f"{self.endpoint}/{self.repo_id}/resolve/{quote(self.revision, safe='')}/{quote(filename)}"

    def get(self, filename: str, byte_range: tuple[int, int] | None = None, limit: int | None = None,
            sink=None) -> bytes:
        """The file's bytes (or `byte_range` of them), at most `limit` (default: the config cap)."""
        problem = repo_path_problem(filename)
        if problem:
            raise SourceError(f"{self.repo_id}: file {filename[:80]!r}: {problem}")
        limit = cap("MAX_CONFIG_BYTES") if limit is None else limit
        where = f"{self.repo_id}/{filename}"
        resp = request(self.http, self.url(filename), limit, where, byte_range, sink)
        if resp.status not in (200, 206):
            raise _status_error(resp.status, self.repo_id, filename, self.revision, resp.headers)
        return resp.body


def request(http: GuardedHTTP, url: str, limit: int, where: str, byte_range=None, sink=None):
    """One GET with retries of 429/5xx and connection failures, within the deadline."""
    for attempt in range(RETRIES + 1):
        try:
            resp = http.get(url, limit, byte_range, sink)
        except TransientError as exc:
            if attempt == RETRIES or http.deadline.left() <= 0:
                raise SourceError(f"{where}: cannot read from {_host(url)} ({exc.message})",
                                  hint="check HF_ENDPOINT and the network") from None
            _sleep(http, BACKOFF_S * 2**attempt, where)
            continue
        if resp.status == 429 or resp.status >= 500:
            if attempt == RETRIES:
                raise SourceError(f"{where}: the hub answered HTTP {resp.status} {RETRIES + 1} times",
                                  hint="try again later")
            wait = BACKOFF_S * 2**attempt
            retry_after = resp.headers.get("retry-after", "")
            if retry_after.isdigit():
                wait = min(float(retry_after), 30.0)
            _sleep(http, wait, where)
            continue
        return resp
    raise AssertionError("unreachable")  # pragma: no cover


def _sleep(http: GuardedHTTP, seconds: float, where: str) -> None:
    left = http.deadline.check(where)
    time.sleep(min(seconds, left))
    http.deadline.check(where)


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc


def _status_error(status: int, repo_id: str, filename: str, revision: str, headers: dict | None = None) -> SourceError:
    code = (headers or {}).get("x-error-code", "")
    if status in (401, 403):
        return SourceError(f"{repo_id}: access denied (HTTP {status}); the repo is gated or private",
                           hint="accept its terms on the hub and set HF_TOKEN")
    if status == 404 and code == "RevisionNotFound":
        return SourceError(f"{repo_id}: revision {revision!r} not found", hint="check the revision")
    if status == 404 and (code == "RepoNotFound" or not filename):
        return SourceError(f"{repo_id}: repository not found (or private: set HF_TOKEN)", hint="check the repo id")
    if status == 404:
        return SourceError(f"{repo_id}@{revision}: {filename} not found (HTTP 404)",
                           hint="check the repo id and revision")
    return SourceError(f"{repo_id}/{filename}: unexpected HTTP {status}")


def list_files(repo_id: str, revision: str, deadline: Deadline | None = None) -> dict[str, int | None]:
    """path -> size of every file in the repo at `revision` (see `listing`)."""
    return {path: _entry_size(entry) for path, entry in listing(repo_id, revision, deadline).items()}


@dataclass(frozen=True)
class FileHash:
    """What the hub says identifies one file's bytes, read from its listing without downloading it:
    `sha256` of the content (LFS files), `git_oid` of the git blob (for LFS files, of the pointer, which
    names the sha256), `problem` when the hub's value is not a well-formed digest (then nothing is trusted).
    `lfs` is None for a local file hashed here (both digests are of its bytes)."""

    size: int | None
    sha256: str | None
    git_oid: str | None
    lfs: bool | None
    problem: str | None = None


_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_GIT_OID = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")


def list_hashes(repo_id: str, revision: str, deadline: Deadline | None = None) -> dict[str, FileHash]:
    """path -> FileHash of every file at `revision`, from the tree listing alone (`lfs.oid` is the content's
    sha256, `oid` the git blob id): no file byte is downloaded."""
    return {path: file_hash(entry) for path, entry in listing(repo_id, revision, deadline).items()}


def file_hash(entry: dict) -> FileHash:
    """One listing row's digests; a value that is not a lowercase-hex digest of the right length is a
    `problem`, never a digest."""
    lfs = entry.get("lfs")
    is_lfs = lfs is not None
    sha = lfs.get("oid", lfs.get("sha256")) if isinstance(lfs, dict) else None
    oid = entry.get("oid")
    problem = None
    if is_lfs and not (isinstance(sha, str) and _SHA256.match(sha)):
        problem = f"the hub's sha256 {str(sha)[:80]!r} is not 64 lowercase hex characters"
        sha = None
    if oid is not None and not (isinstance(oid, str) and _GIT_OID.match(oid)):
        problem = problem or f"the hub's git oid {str(oid)[:80]!r} is not 40 or 64 lowercase hex characters"
        oid = None
    return FileHash(_entry_size(entry), sha, oid, is_lfs, problem)


def listing(repo_id: str, revision: str, deadline: Deadline | None = None) -> dict[str, dict]:
    """path -> listing row of every file in the repo at `revision`: pages, files and bytes capped
    (formats/limits.py); a listed path that would leave the repo is an error."""
    check_repo_id(repo_id, revision)
    http = GuardedHTTP(deadline or Deadline(), auth_headers())
    base = endpoint()
    url = f"{base}/api/models/{repo_id}/tree/{quote(revision, safe='')}?recursive=true&expand=false"
    files: dict[str, dict] = {}
    max_pages, max_files = cap("MAX_LISTING_PAGES"), cap("MAX_LISTING_FILES")
    for page in range(max_pages + 1):
        if page == max_pages:
            raise SourceError(f"{repo_id}: the listing runs past {max_pages} pages; refused",
                              hint="raise ARCHPROBE_MAX_LISTING_PAGES if the repo is that large")
        resp = request(http, url, cap("MAX_LISTING_BYTES"), f"{repo_id} (listing)")
        if resp.status != 200:
            raise _status_error(resp.status, repo_id, "", revision, resp.headers)
        rows = _load_list(resp.body, repo_id)
        for entry in rows:
            if not isinstance(entry, dict) or entry.get("type", "file") != "file":
                continue
            path = entry.get("path")
            problem = repo_path_problem(path)
            if problem:
                raise SourceError(f"{repo_id}: the listing names {str(path)[:80]!r}, which {problem}; refused")
            files[path] = entry
            if len(files) > max_files:
                raise SourceError(f"{repo_id}: the listing has over {max_files:,} files; refused")
        nxt = _NEXT.search(resp.headers.get("link", ""))
        if not nxt:
            return files
        url = nxt.group(1)
        if not url.startswith(base + "/"):
            raise SourceError(f"{repo_id}: the listing's next page is on another server; refused")
    raise AssertionError("unreachable")  # pragma: no cover


def _load_list(raw: bytes, repo_id: str) -> list:
    import orjson

    from archprobe.formats.jsontext import check_cost

    check_cost(raw, repo_id, "the listing", SourceError)
    try:
        rows = orjson.loads(raw)
    except (orjson.JSONDecodeError, ValueError):
        raise SourceError(f"{repo_id}: the listing is not valid JSON") from None
    if not isinstance(rows, list):
        raise SourceError(f"{repo_id}: the listing is not a JSON list")
    return rows


def _entry_size(entry: dict) -> int | None:
    lfs = entry.get("lfs")
    size = lfs.get("size") if isinstance(lfs, dict) else entry.get("size")
    if size is None:
        size = entry.get("size")
    return size if type(size) is int and 0 <= size < 1 << 62 else None


def read_remote_header(reader: HubReader, filename: str, size: int | None) -> Header:
    where = f"{reader.repo_id}/{filename}"
    prefix = reader.get(filename, (0, 7), limit=8)
    n = header_length(prefix, where, size)
    raw = reader.get(filename, (8, 8 + n - 1), limit=n)
    if len(raw) != n:
        raise CheckpointError(where, f"truncated: header needs {n:,} bytes, got {len(raw):,}")
    return parse_header(raw, where, size)


def open_hub(source: str, progress: Progress | None = None) -> RawCheckpoint:
    """`org/name[@revision][:TAG]`: safetensors shards, or (none there, or TAG given) one GGUF model."""
    source, _, tag = source.partition(":")
    repo_id, _, revision = source.partition("@")
    revision = revision or "main"
    deadline = Deadline()
    files = list_files(repo_id, revision, deadline)
    reader = HubReader(repo_id, revision, deadline)
    config = None
    if "config.json" in files:
        config = parse_config_bytes(reader.get("config.json", limit=cap("MAX_CONFIG_BYTES")),
                                    f"{repo_id}/config.json")
    ggufs = [f for f in files if f.endswith(".gguf")]
    warnings: list[str] = []
    shards: list[str] = []
    if not tag:
        top = sorted(f for f in files if f.endswith(".safetensors") and "/" not in f)
        numbered = numbered_shards(top)
        if numbered is None and INDEX in files:
            where = f"{repo_id}/{INDEX}"
            index = parse_index_bytes(reader.get(INDEX, limit=cap("MAX_INDEX_BYTES")), where)
            shards = shard_names_from_index(index, where)
            missing = [s for s in shards if s not in files]
            if missing:
                raise CheckpointError(f"{repo_id}/{missing[0]}", "shard named by the index is not in the repo")
        else:
            shards = numbered or top
            extra = sorted(set(top) - set(shards))
            if extra:
                warnings.append(f"{len(extra)} .safetensors file(s) outside the numbered shard set were ignored: "
                                + ", ".join(extra[:5]))
    if len(shards) > cap("MAX_SHARDS"):
        raise CheckpointError(repo_id, f"{len(shards):,} shards, over the {cap('MAX_SHARDS'):,} cap")
    if not shards and ggufs:
        return _open_hub_gguf(reader, files, ggufs, tag or None, config, progress)
    if not shards:
        kind = ("no .gguf files (':TAG' selects a GGUF model)" if tag else
                "pickle-based weights only (never unpickled)" if any(f.endswith(PICKLE_SUFFIXES) for f in files)
                else "no .safetensors or .gguf files")
        raise SourceError(f"{repo_id}@{revision}: {kind}")
    totals = HeaderTotals(repo_id)
    lock = threading.Lock()

    def one(name: str) -> Header:
        h = read_remote_header(reader, name, files.get(name))
        with lock:
            totals.add(h)
        return h

    headers = _in_parallel(shards, one, progress)
    return RawCheckpoint("hub", repo_id, revision, config, headers, warnings=warnings,
                         bytes_fetched=reader.bytes_read)


def _in_parallel(names: list[str], read, progress: Progress | None) -> list:
    """read(name) for every name on up to PARALLEL threads, in order, ticking `progress`; the first
    error stops the rest (queued reads are cancelled)."""
    done = [0]
    lock = threading.Lock()

    def one(name: str):
        result = read(name)
        with lock:
            done[0] += 1
            if progress:
                progress(done[0], len(names))
        return result

    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(names))) as pool:
        futures = [pool.submit(one, n) for n in names]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def _open_hub_gguf(reader: HubReader, files: dict, ggufs: list[str], tag: str | None, config: dict | None,
                   progress: Progress | None) -> RawCheckpoint:
    """One GGUF model of the repo (its split shards together): each header by Range reads."""
    from archprobe.formats.gguf import choose_model, gguf_config, parse_gguf

    chosen, warnings = choose_model(ggufs, files, tag, f"{reader.repo_id}@{reader.revision}")

    def one(name: str):
        size = files.get(name)

        def fetch(offset: int, n: int) -> bytes:
            return reader.get(name, (offset, offset + n - 1), limit=n)

        return parse_gguf(fetch, size, name, f"{reader.repo_id}/{name}")

    parsed = _in_parallel(chosen, one, progress)
    check_distinct([h for h, _ in parsed], reader.repo_id)
    meta = parsed[0][1]
    return RawCheckpoint("gguf", reader.repo_id, reader.revision, config or gguf_config(meta),
                         [h for h, _ in parsed], meta, warnings, bytes_fetched=reader.bytes_read)
