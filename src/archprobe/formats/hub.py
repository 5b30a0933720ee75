"""Hub sources: list the repo, then fetch only header bytes of each shard with HTTP Range requests.

safetensors shards by default; a repo without them (or a source with `:TAG`) is read as one GGUF model,
its header read front to back in growing Range blocks (formats/gguf.py).

Per shard: `Range: bytes=0-7` (the header length), then exactly the header. Shards are fetched in
parallel threads. 429 and 5xx are retried with exponential backoff (honouring Retry-After); 401/403
(gated or private) and 404 become one clear message. `HF_ENDPOINT` and `HF_TOKEN` are honoured
through huggingface_hub, which is also our HTTP client.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from archprobe.errors import CheckpointError, SourceError
from archprobe.formats.safetensors import Header, header_length, parse_header
from archprobe.formats.sources import (
    PICKLE_SUFFIXES,
    Progress,
    RawCheckpoint,
    parse_config_bytes,
    parse_index_bytes,
    shard_names_from_index,
)

RETRIES = 5
BACKOFF_S = 0.25
TIMEOUT_S = 30.0
PARALLEL = 16


def endpoint() -> str:
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


class HubReader:
    """Byte-counting, retrying HTTP reads of one repo at one revision."""

    def __init__(self, repo_id: str, revision: str):
        from huggingface_hub.utils import build_hf_headers, get_session

        self.repo_id = repo_id
        self.revision = revision
        self.endpoint = endpoint()
        self.session = get_session()
        self.headers = build_hf_headers(token=os.environ.get("HF_TOKEN") or None)
        self.bytes_read = 0
        self._lock = threading.Lock()

    def url(self, filename: str) -> str:
        from urllib.parse import quote

        return f"{self.endpoint}/{self.repo_id}/resolve/{quote(self.revision, safe='')}/{quote(filename)}"

    def get(self, filename: str, byte_range: tuple[int, int] | None = None) -> bytes:
        headers = dict(self.headers)
        if byte_range:
            headers["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
        where = f"{self.repo_id}/{filename}"
        for attempt in range(RETRIES + 1):
            try:
                resp = self.session.get(self.url(filename), headers=headers, timeout=TIMEOUT_S,
                                        follow_redirects=True)
            except Exception as exc:  # connection refused, reset, timeout: transient, retry
                if attempt == RETRIES:
                    raise SourceError(f"{where}: cannot reach {self.endpoint} ({type(exc).__name__})",
                                      hint="check HF_ENDPOINT and the network") from None
                time.sleep(BACKOFF_S * 2**attempt)
                continue
            status = resp.status_code
            if status in (200, 206):
                body = resp.content
                if byte_range and status == 200:  # server ignored Range: keep only what we asked for
                    body = body[byte_range[0]: byte_range[1] + 1]
                with self._lock:
                    self.bytes_read += len(body)
                return body
            if status == 429 or status >= 500:
                if attempt == RETRIES:
                    raise SourceError(f"{where}: the hub answered HTTP {status} {RETRIES + 1} times",
                                      hint="try again later")
                wait = BACKOFF_S * 2**attempt
                retry_after = resp.headers.get("Retry-After", "")
                if retry_after.isdigit():
                    wait = min(float(retry_after), 30.0)
                time.sleep(wait)
                continue
            raise _status_error(status, self.repo_id, filename, self.revision)
        raise AssertionError("unreachable")  # pragma: no cover


def _status_error(status: int, repo_id: str, filename: str, revision: str) -> SourceError:
    if status in (401, 403):
        return SourceError(f"{repo_id}: access denied (HTTP {status}); the repo is gated or private",
                           hint="accept its terms on the hub and set HF_TOKEN")
    if status == 404:
        return SourceError(f"{repo_id}@{revision}: {filename} not found (HTTP 404)",
                           hint="check the repo id and revision")
    return SourceError(f"{repo_id}/{filename}: unexpected HTTP {status}")


def list_files(repo_id: str, revision: str) -> dict[str, int | None]:
    """path -> size of every file in the repo at `revision`."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    api = HfApi(endpoint=endpoint(), token=os.environ.get("HF_TOKEN") or None)
    try:
        files = {}
        for entry in api.list_repo_tree(repo_id, revision=revision, recursive=True):
            size = getattr(entry, "size", None)
            lfs = getattr(entry, "lfs", None)
            if lfs is not None:
                size = getattr(lfs, "size", None) or (lfs.get("size") if isinstance(lfs, dict) else size)
            if hasattr(entry, "blob_id") or size is not None:
                files[entry.path] = size
        return files
    except GatedRepoError:
        raise _status_error(403, repo_id, "", revision) from None
    except RevisionNotFoundError:
        raise SourceError(f"{repo_id}: revision {revision!r} not found", hint="check the revision") from None
    except RepositoryNotFoundError:
        raise SourceError(f"{repo_id}: repository not found (or private: set HF_TOKEN)",
                          hint="check the repo id") from None
    except HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", 0) or 0
        if status in (401, 403, 404):
            raise _status_error(status, repo_id, "", revision) from None
        raise SourceError(f"{repo_id}: listing failed ({str(exc).splitlines()[0][:160]})") from None
    except Exception as exc:
        raise SourceError(f"{repo_id}: cannot list the repo at {endpoint()} ({type(exc).__name__})",
                          hint="check HF_ENDPOINT and the network") from None


def read_remote_header(reader: HubReader, filename: str, size: int | None) -> Header:
    where = f"{reader.repo_id}/{filename}"
    prefix = reader.get(filename, (0, 7))
    n = header_length(prefix, where, size)
    raw = reader.get(filename, (8, 8 + n - 1))
    if len(raw) != n:
        raise CheckpointError(where, f"truncated: header needs {n:,} bytes, got {len(raw):,}")
    return parse_header(raw, where, size)


def open_hub(source: str, progress: Progress | None = None) -> RawCheckpoint:
    """`org/name[@revision][:TAG]`: safetensors shards, or (none there, or TAG given) one GGUF model."""
    source, _, tag = source.partition(":")
    repo_id, _, revision = source.partition("@")
    revision = revision or "main"
    files = list_files(repo_id, revision)
    reader = HubReader(repo_id, revision)
    config = None
    if "config.json" in files:
        config = parse_config_bytes(reader.get("config.json"), f"{repo_id}/config.json")
    ggufs = [f for f in files if f.endswith(".gguf")]
    if "model.safetensors.index.json" in files and not tag:
        index = parse_index_bytes(reader.get("model.safetensors.index.json"),
                                  f"{repo_id}/model.safetensors.index.json")
        shards = shard_names_from_index(index, f"{repo_id}/model.safetensors.index.json")
        missing = [s for s in shards if s not in files]
        if missing:
            raise CheckpointError(f"{repo_id}/{missing[0]}", "shard named by the index is not in the repo")
    else:
        shards = [] if tag else sorted(f for f in files if f.endswith(".safetensors") and "/" not in f)
    if not shards and ggufs:
        return _open_hub_gguf(reader, files, ggufs, tag or None, config, progress)
    if not shards:
        kind = ("no .gguf files (':TAG' selects a GGUF model)" if tag else
                "pickle-based weights only (never unpickled)" if any(f.endswith(PICKLE_SUFFIXES) for f in files)
                else "no .safetensors or .gguf files")
        raise SourceError(f"{repo_id}@{revision}: {kind}")
    headers = _in_parallel(shards, lambda name: read_remote_header(reader, name, files.get(name)), progress)
    return RawCheckpoint("hub", repo_id, revision, config, headers, bytes_fetched=reader.bytes_read)


def _in_parallel(names: list[str], read, progress: Progress | None) -> list:
    """read(name) for every name on up to PARALLEL threads, in order, ticking `progress`."""
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
        return list(pool.map(one, names))


def _open_hub_gguf(reader: HubReader, files: dict, ggufs: list[str], tag: str | None, config: dict | None,
                   progress: Progress | None) -> RawCheckpoint:
    """One GGUF model of the repo (its split shards together): each header by Range reads."""
    from archprobe.formats.gguf import choose_model, gguf_config, parse_gguf

    chosen, warnings = choose_model(ggufs, files, tag, f"{reader.repo_id}@{reader.revision}")

    def one(name: str):
        size = files.get(name)

        def fetch(offset: int, n: int) -> bytes:
            return reader.get(name, (offset, offset + n - 1))

        return parse_gguf(fetch, size, name, f"{reader.repo_id}/{name}")

    parsed = _in_parallel(chosen, one, progress)
    meta = parsed[0][1]
    return RawCheckpoint("gguf", reader.repo_id, reader.revision, config or gguf_config(meta),
                         [h for h, _ in parsed], meta, warnings, bytes_fetched=reader.bytes_read)
