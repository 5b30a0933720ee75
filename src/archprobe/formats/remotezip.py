"""A zip archive (a wheel) read over HTTP Range: its end-of-central-directory, its central directory, and
only the members asked for, never the whole file.

Why: a vLLM wheel is ~400 MB; the registry that says which architectures it knows is ~10 KB of it.
Every range is an explicit `start-end` (some indexes refuse suffix ranges), so the file's size must be
known first: one 1-byte read's Content-Range gives it, and proves the server honours Range (a server
that answers 200 would otherwise stream the whole wheel for the tail); it must agree with the index.

The archive is hostile input: the directory must lie inside the file and before its own end record, a
member must lie before the directory, its local header must carry the same name, its inflated size is
capped (MAX_WHEEL_MEMBER_BYTES) and so is its compression ratio (MAX_INFLATE_RATIO), and the inflated
bytes must match the directory's CRC-32. Any breach is one SourceError line.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from archprobe.errors import SourceError
from archprobe.formats.http import GuardedHTTP, shown_url
from archprobe.formats.limits import cap

EOCD_SIG, EOCD64_SIG, LOCATOR_SIG = b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07"
CDIR_SIG, LOCAL_SIG = b"PK\x01\x02", b"PK\x03\x04"
FIRST_TAIL = 8 * 1024          # most wheels have no comment: the end record is in the last 22 bytes
LOCAL_SLACK = 1024             # a local header's extra field may be longer than the directory's copy


@dataclass(frozen=True)
class Member:
    name: str
    offset: int          # of its local header
    compressed: int
    size: int
    method: int
    crc: int


class RemoteZip:
    """One remote zip; `bytes_fetched` counts every body byte its reads kept."""

    def __init__(self, http: GuardedHTTP, url: str, size: int | None = None, what: str | None = None):
        self.http, self.url, self.what = http, url, what or shown_url(url)
        self.bytes_fetched = 0
        self.size = self._probe_size()   # also proves Range is honoured before a tail read could stream it all
        if isinstance(size, int) and size > 0 and size != self.size:
            raise SourceError(f"{self.what}: the index lists {size:,} bytes, the server serves {self.size:,}; refused")
        self.members: dict[str, Member] = {}
        self._directory_start = 0
        self._read_directory()

    # -- reads --------------------------------------------------------------------------------
    def _range(self, first: int, last: int) -> bytes:
        if first < 0 or last < first or last >= self.size:
            raise SourceError(f"{self.what}: the archive points at bytes {first}-{last}, outside its "
                              f"{self.size:,} bytes; refused")
        resp = self.http.get(self.url, last - first + 1, byte_range=(first, last))
        if resp.status not in (200, 206):
            raise SourceError(f"{self.what}: HTTP {resp.status} for a range read")
        self.bytes_fetched += len(resp.body)
        if len(resp.body) != last - first + 1:
            raise SourceError(f"{self.what}: asked for {last - first + 1:,} bytes, got {len(resp.body):,}")
        return resp.body

    def _probe_size(self) -> int:
        from archprobe.formats.http import _content_range

        resp = self.http.get(self.url, 1, byte_range=(0, 0))
        total = resp.headers.get("content-range", "").rpartition("/")[2]
        if resp.status != 206 or not total.isdigit() or _content_range(resp.headers["content-range"]) is None:
            raise SourceError(f"{self.what}: the server does not answer Range reads (HTTP {resp.status}, "
                              f"{resp.headers.get('content-range', 'no Content-Range')!r}); reading whole wheels "
                              "is refused")
        self.bytes_fetched += len(resp.body)
        return int(total)

    # -- the directory ------------------------------------------------------------------------
    def _read_directory(self) -> None:
        if self.size < 22:
            raise SourceError(f"{self.what}: {self.size} bytes is too short for a zip archive")
        tail_first = max(0, self.size - min(FIRST_TAIL, self.size))
        tail = self._range(tail_first, self.size - 1)
        at = tail.rfind(EOCD_SIG, 0, len(tail) - 18)
        if at < 0 and tail_first > 0:   # a long archive comment: look further back, up to its 64 KB maximum
            tail_first = max(0, self.size - min(int(cap("MAX_WHEEL_TAIL_BYTES")), self.size))
            tail = self._range(tail_first, self.size - 1)
            at = tail.rfind(EOCD_SIG, 0, len(tail) - 18)
        if at < 0:
            raise SourceError(f"{self.what}: no zip end-of-central-directory record; not a wheel")
        eocd_pos = tail_first + at
        _, _, _, count, cd_size, cd_offset, _ = struct.unpack_from("<HHHHIIH", tail, at + 4)
        if 0xFFFF in (count,) or 0xFFFFFFFF in (cd_size, cd_offset):
            count, cd_size, cd_offset, eocd_pos = self._zip64(tail, tail_first, at)
        if count > cap("MAX_WHEEL_MEMBERS"):
            raise SourceError(f"{self.what}: {count:,} members, over the {cap('MAX_WHEEL_MEMBERS'):,} cap; refused")
        if cd_size > cap("MAX_WHEEL_DIRECTORY_BYTES"):
            raise SourceError(f"{self.what}: a {cd_size:,}-byte central directory, over the "
                              f"{cap('MAX_WHEEL_DIRECTORY_BYTES'):,}-byte cap; refused")
        if cd_offset + cd_size > eocd_pos:
            raise SourceError(f"{self.what}: the central directory ({cd_offset:,}+{cd_size:,}) overlaps its own "
                              f"end record at {eocd_pos:,}; the archive lies about its offsets")
        if cd_offset >= tail_first:   # already read with the tail
            data = tail[cd_offset - tail_first: cd_offset - tail_first + cd_size]
        else:
            data = self._range(cd_offset, cd_offset + cd_size - 1) if cd_size else b""
        self._directory_start = cd_offset
        self._parse_directory(data, count)

    def _zip64(self, tail: bytes, tail_first: int, at: int) -> tuple[int, int, int, int]:
        loc = at - 20
        if loc < 0 or tail[loc:loc + 4] != LOCATOR_SIG:
            raise SourceError(f"{self.what}: a zip64 archive without its locator record; refused")
        (record_at,) = struct.unpack_from("<Q", tail, loc + 8)
        if record_at >= tail_first + loc:
            raise SourceError(f"{self.what}: the zip64 end record lies past its locator; refused")
        if record_at >= tail_first:
            rec = tail[record_at - tail_first: record_at - tail_first + 56]
        else:
            rec = self._range(record_at, record_at + 55)
        if len(rec) < 56 or rec[:4] != EOCD64_SIG:
            raise SourceError(f"{self.what}: no zip64 end record where the locator points; refused")
        count, cd_size, cd_offset = struct.unpack_from("<QQQ", rec, 32)
        return count, cd_size, cd_offset, record_at

    def _parse_directory(self, data: bytes, count: int) -> None:
        pos = 0
        for _ in range(count):
            if data[pos:pos + 4] != CDIR_SIG or pos + 46 > len(data):
                raise SourceError(f"{self.what}: the central directory is cut short or corrupt; refused")
            (method, crc, csize, usize, nlen, xlen, clen, offset) = struct.unpack_from("<10xH4xIIIHHH8xI", data, pos)
            name_bytes = data[pos + 46: pos + 46 + nlen]
            extra = data[pos + 46 + nlen: pos + 46 + nlen + xlen]
            if 0xFFFFFFFF in (csize, usize, offset):
                usize, csize, offset = _zip64_extra(extra, usize, csize, offset)
            pos += 46 + nlen + xlen + clen
            if pos > len(data):
                raise SourceError(f"{self.what}: a central-directory entry runs past the directory; refused")
            name = name_bytes.decode("utf-8", "replace")
            if offset + 30 + csize > self._directory_start:
                raise SourceError(f"{self.what}: member {name[:80]!r} is said to lie at {offset:,}+{csize:,}, "
                                  f"past the central directory at {self._directory_start:,}; the archive lies "
                                  "about its offsets")
            self.members[name] = Member(name, offset, csize, usize, method, crc)

    # -- members ------------------------------------------------------------------------------
    def names(self) -> list[str]:
        return list(self.members)

    def read(self, name: str) -> bytes:
        """One member's inflated bytes (capped, ratio-checked, CRC-checked)."""
        m = self.members.get(name)
        if m is None:
            raise KeyError(name)
        limit = int(cap("MAX_WHEEL_MEMBER_BYTES"))
        if m.size > limit:
            raise SourceError(f"{self.what}: member {name!r} inflates to {m.size:,} bytes, over the "
                              f"{limit:,}-byte cap; refused")
        if m.method not in (0, 8):
            raise SourceError(f"{self.what}: member {name!r} uses zip method {m.method}, not stored/deflate")
        if m.method == 8 and m.size > max(1, m.compressed) * cap("MAX_INFLATE_RATIO"):
            raise SourceError(f"{self.what}: member {name!r} is compressed {m.size // max(1, m.compressed):,}:1, "
                              f"over the {cap('MAX_INFLATE_RATIO'):,}:1 cap (a zip bomb, not source code); refused")
        encoded = len(name.encode())
        last = min(m.offset + 30 + encoded + LOCAL_SLACK + m.compressed, self._directory_start) - 1
        blob = self._range(m.offset, last)
        if blob[:4] != LOCAL_SIG or len(blob) < 30:
            raise SourceError(f"{self.what}: no local header where the directory puts {name!r}; the archive lies "
                              "about its offsets")
        nlen, xlen = struct.unpack_from("<HH", blob, 26)
        if blob[30:30 + nlen].decode("utf-8", "replace") != name:
            raise SourceError(f"{self.what}: the local header at {m.offset:,} names another member than "
                              f"{name!r}; the archive lies about its offsets")
        start = 30 + nlen + xlen
        if start + m.compressed > len(blob):   # an unusually long local extra field
            more_last = m.offset + start + m.compressed - 1
            if more_last >= self._directory_start:
                raise SourceError(f"{self.what}: member {name!r} runs into the central directory; refused")
            blob += self._range(m.offset + len(blob), more_last)
        raw = blob[start:start + m.compressed]
        if m.method == 0:
            out = raw[:m.size]
        else:
            inflater = zlib.decompressobj(-15)
            try:
                out = inflater.decompress(raw, m.size + 1)
            except zlib.error as exc:
                raise SourceError(f"{self.what}: member {name!r} does not inflate ({exc})") from None
        if len(out) != m.size or zlib.crc32(out) != m.crc:
            raise SourceError(f"{self.what}: member {name!r} does not match its directory entry (size or CRC-32); "
                              "refused")
        return out


def _zip64_extra(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4: pos + 4 + size]
        if tag == 1:
            values, i = [], 0
            for present in (usize == 0xFFFFFFFF, csize == 0xFFFFFFFF, offset == 0xFFFFFFFF):
                if present and i + 8 <= len(body):
                    values.append(struct.unpack_from("<Q", body, i)[0])
                    i += 8
                else:
                    values.append(None)
            usize = values[0] if values[0] is not None else usize
            csize = values[1] if values[1] is not None else csize
            offset = values[2] if values[2] is not None else offset
            break
        pos += 4 + size
    return usize, csize, offset
