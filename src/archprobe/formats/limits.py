"""Every cap on bytes, counts and time that applies to input from outside, in one place.

Why one place: a reader without a cap is a memory bomb waiting for a hostile file or server, and a
cap nobody can find cannot be reasoned about. Each value can be lowered (or raised) through an
environment variable of the same name prefixed `ARCHPROBE_` (tests use small ones to stay fast):

| cap                              | default  | what it bounds                                          |
|----------------------------------|----------|---------------------------------------------------------|
| MAX_HEADER_BYTES                 | 100 MB   | one safetensors JSON header (the hub's API allows 25 MB) |
| MAX_TOTAL_HEADER_BYTES           | 1 GB     | all safetensors headers of one checkpoint (K3: 76 MB)    |
| MAX_TENSOR_ENTRIES               | 200,000  | tensor records kept, all shards, experts folded (K3: 3,714) |
| MAX_CONFIG_BYTES                 | 16 MB    | config.json, tokenizer_config.json and friends           |
| MAX_INDEX_BYTES                  | 256 MB   | model.safetensors.index.json (K3: ~40 MB)                |
| MAX_LISTING_BYTES                | 64 MB    | one page of a hub listing or model-info answer           |
| MAX_LISTING_PAGES                | 200      | pages of one hub listing (1,000 files a page)            |
| MAX_LISTING_FILES                | 200,000  | files in one hub listing                                 |
| MAX_REQUESTS                     | 20,000   | HTTP requests of one command                             |
| MAX_REDIRECTS                    | 5        | redirects followed for one request                       |
| MAX_JSON_COST                    | 256 MB   | estimated memory of one parsed JSON document (formats/jsontext.py) |
| MAX_JSON_DEPTH                   | 64       | nesting of config/index JSON                             |
| MAX_SHARDS                       | 100,000  | shard files of one checkpoint                            |
| MAX_STRUCTURED_BYTES             | 256 MB   | a claim, export or Inspect log (formats/structured.py)   |
| MAX_ARCHIVE_BYTES                | 256 MB   | a zip (Inspect .eval), all members inflated              |
| MAX_ARCHIVE_MEMBERS              | 100,000  | members of one zip                                       |
| REQUEST_DEADLINE_S               | 120      | one HTTP request, start to last byte (not per read)      |
| DEADLINE_S                       | 900      | all network reads of one command; reading a source (local too) |
| MAX_PACKAGE_INDEX_BYTES          | 32 MB    | one package-index page (PEP 691 JSON / PEP 503 HTML / JSON API) |
| MAX_PACKAGE_FILES                | 50,000   | files listed for one project on the package index        |
| MAX_WHEEL_TAIL_BYTES             | 66 KB    | a wheel's end-of-central-directory search (64 KB comment + record) |
| MAX_WHEEL_DIRECTORY_BYTES        | 64 MB    | a wheel's central directory                              |
| MAX_WHEEL_MEMBERS                | 200,000  | entries in a wheel's central directory                   |
| MAX_WHEEL_MEMBER_BYTES           | 16 MB    | one registry member of a wheel, inflated                 |
| MAX_INFLATE_RATIO                | 100      | inflated / compressed size of one member (source: ~3-8)   |
| MAX_FORGE_PAGES                  | 10       | pages of one forge search (100 results a page)           |
| MAX_FORGE_BYTES                  | 16 MB    | one page of a forge search answer                        |
| FORGE_MAX_WAIT_S                 | 60       | a forge rate limit that resets sooner is waited out      |

Memory (what each reader may cost at most; tests/hostile/test_memory.py holds each to 2x this plus a
fixed 40 MB of interpreter and allocator slack):

- a safetensors header: its bytes, plus ~300 bytes per record kept (MAX_TENSOR_ENTRIES: 60 MB), plus
  16 bytes per entry for the overlap check (at most ~0.4x the header's bytes). Headers up to 1 MB are
  parsed whole (transient 10-30x, so at most ~30 MB); larger ones entry by entry
  (formats/headerstream.py), never as one JSON document. With the defaults: under ~200 MB. Parallel
  header workers only take headers up to 2 MB each.
- a JSON document (config.json, the index, a hub listing page, model info, a validate document, a
  JSON card): refused before parsing when its estimated parse cost is over MAX_JSON_COST (256 MB);
  the estimate (formats/jsontext.parse_cost) bounds the measured cost from above.
- GGUF metadata and tensor infos: at most gguf.MAX_KEPT_BYTES (64 MB) of kept values, estimated as
  they are read; arrays longer than gguf.MAX_KEPT and tokenizer arrays are walked, not kept; the
  header is read in blocks of at most gguf.MAX_BLOCK (32 MB), ~3 of them alive at once.
- network reads are streamed in 64 KB chunks and aborted at the cap, so a response never costs more
  than its cap (and its parse is bounded as above); a metrics page: 2 MB and 10,000 series.
- a YAML card: 256 KB (PyYAML builds ~175x its bytes), its expanded size capped at 1,000,000 values.

Time: DEADLINE_S bounds all network reads of one command (per request: REQUEST_DEADLINE_S) and, via
`reading_deadline`, reading a source's config and headers, local files included, and each tensor that
validate reads (opening its shard included). validate's compute is not bounded: a large model takes as
long as its layers take, with a progress bar.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager

from archprobe.errors import SourceError

_DEFAULTS: dict[str, float] = {
    "MAX_HEADER_BYTES": 100 * 1024 * 1024,
    "MAX_TOTAL_HEADER_BYTES": 1024 * 1024 * 1024,
    "MAX_TENSOR_ENTRIES": 200_000,
    "MAX_CONFIG_BYTES": 16 * 1024 * 1024,
    "MAX_INDEX_BYTES": 256 * 1024 * 1024,
    "MAX_LISTING_BYTES": 64 * 1024 * 1024,
    "MAX_LISTING_PAGES": 200,
    "MAX_LISTING_FILES": 200_000,
    "MAX_REQUESTS": 20_000,
    "MAX_REDIRECTS": 5,
    "MAX_JSON_COST": 256 * 1024 * 1024,
    "MAX_JSON_DEPTH": 64,
    "MAX_SHARDS": 100_000,
    "MAX_STRUCTURED_BYTES": 256 * 1024 * 1024,
    "MAX_ARCHIVE_BYTES": 256 * 1024 * 1024,
    "MAX_ARCHIVE_MEMBERS": 100_000,
    "REQUEST_DEADLINE_S": 120.0,
    "DEADLINE_S": 900.0,
    "MAX_PACKAGE_INDEX_BYTES": 32 * 1024 * 1024,
    "MAX_PACKAGE_FILES": 50_000,
    "MAX_WHEEL_TAIL_BYTES": 65_535 + 22 + 20 + 56,
    "MAX_WHEEL_DIRECTORY_BYTES": 64 * 1024 * 1024,
    "MAX_WHEEL_MEMBERS": 200_000,
    "MAX_WHEEL_MEMBER_BYTES": 16 * 1024 * 1024,
    "MAX_INFLATE_RATIO": 100,
    "MAX_FORGE_PAGES": 10,
    "MAX_FORGE_BYTES": 16 * 1024 * 1024,
    "FORGE_MAX_WAIT_S": 60.0,
}

# Fixed caps (no environment override), kept here with the others so the README can quote one place.
MAX_RESPONSE_BYTES = 8 * 1024 * 1024        # eval: one chat response; at concurrency 8, ~64 MB of buffers
MAX_VALIDATE_DOC_BYTES = 64 * 1024 * 1024   # report --validate-json: the validate document read back

# adapt/releases.py
MAX_RELEASE_CANDIDATES = 8   # model files read per release when the registry is spread over per-model files

# cli/errors.py
MAX_ERROR_LINE = 600

# cli/options.py
MAX_OPTION_BYTES = 10 ** 21   # a zettabyte of device memory
MAX_OPTION_LIST = 256   # items in a comma-separated option
MAX_OPTION_TOKENS = 1 << 40   # a context or chunk of a trillion tokens is already no plan
MAX_TOKEN_ID = (1 << 31) - 1

# eval/agent.py
MAX_RESULT_CHARS = 16000
MAX_TOOL_ARGS = 2 * 1024 * 1024

# eval/client.py
MAX_CONTENT_CHARS = 4 * 1024 * 1024

# eval/ledger.py
MAX_ATTEMPTS_PER_TASK = 100000   # what `eval run --attempts` accepts

# eval/tasks.py
MAX_TASKS_BYTES = 64 * 1024 * 1024
MAX_TASK_TIMEOUT_S = 7 * 24 * 3600

# eval/workspace.py
MAX_FILE_WRITE = 1 << 20
MAX_NAME_CHARS = 255
MAX_PATH_CHARS = 1024

# formats/forge.py
MAX_PULL_LOOKUPS = 50
MAX_TERMS = 6   # GitHub allows five AND/OR/NOT operators in one query
MAX_TITLE = 300

# formats/gguf.py
GGUF_MAX_ARRAY = 1 << 28   # items in one metadata array (walked over, never materialised past MAX_KEPT)
GGUF_MAX_DIMS = 8
GGUF_MAX_ELEMENTS = 1 << 50
GGUF_MAX_HEADER_BYTES = 256 << 20   # the whole header (real ones: < 50 MB, nearly all tokenizer arrays)
GGUF_MAX_KEPT = 1 << 16   # items of an array that is kept (per-layer lists); longer ones are counted only
GGUF_MAX_KEPT_BYTES = 64 << 20   # Python objects kept from one header: metadata values, keys, tensor infos
GGUF_MAX_KEPT_STRING = 1 << 20   # a longer string value is skipped and noted, not kept
GGUF_MAX_META = 1 << 16   # metadata entries (real files: ~50)
GGUF_MAX_NAME = 4096   # a key or tensor name (the GGUF spec: keys < 64 KB, ggml names < 64 bytes)
GGUF_MAX_NESTING = 8   # arrays of arrays
GGUF_MAX_TENSORS = 1 << 18   # tensor infos (GGUF stacks experts: real files have a few thousand)

# formats/headerstream.py
MAX_METADATA_BYTES = 1 << 20

# formats/http.py
MAX_ERROR_BODY_BYTES = 64 * 1024   # what is kept of a non-2xx answer

# formats/jsontext.py
JSON_MAX_DIGITS = 100   # an integer longer than this is no size, count or id (and costs quadratic time to convert)
MAX_EXPANDED = 1000000   # values of a parsed document counted with repeats (YAML aliases share them)

# formats/safetensors.py
SAFETENSORS_MAX_DIMS = 16   # rank of one tensor
SAFETENSORS_MAX_ELEMENTS = 1 << 50   # elements of one tensor (K3's largest: 1.2e9)

# formats/structured.py
MAX_YAML_BYTES = 256 * 1024   # PyYAML builds ~175x its bytes of nodes: at most ~45 MB
STRUCTURED_MAX_DIGITS = 60   # an integer with more digits is no count, size or price anyone writes

# observe/recorder.py
MAX_ATTNRES_TOKENS = 128   # AttnRes weights kept per token for at most this many tokens

# observe/sample.py
MAX_OBSERVE_TOKENS = 16384
MAX_PROMPT_FILE_BYTES = 4 * 1024 * 1024

# ops/native/__init__.py
MAX_LIBRARY_BYTES = 64 << 20   # a built or cached library larger than this is not loaded
MAX_TOOL_OUTPUT = 64 * 1024   # what is kept of a compiler's stdout / stderr

# structure/card.py
MAX_CARD_INT = 2 ** 48   # no width, count or length of a model comes near; past it, float math goes inexact

# structure/config.py
MAX_DEPTH = 32

# structure/positions.py
MAX_FACTOR_LIST = 4096   # longrope factor lists: one per rotated channel pair

# track/plot.py
MAX_PLOT_PANELS = 40   # one panel per series: 10,000 series was a 22,000-inch figure and minutes of work
MAX_PLOT_POINTS = 10000   # the latest points of a series are drawn

# track/usage.py
MAX_METRICS_BYTES = 2 * 1024 * 1024   # real vLLM/SGLang pages: 50-300 KB; parsed samples cost ~30x their bytes
MAX_METRICS_SERIES = 10000   # (metric, model) pairs kept

# validate/pipeline.py
MAX_GENERATE = 4096


def cap(name: str) -> int | float:
    """The cap `name`, from `ARCHPROBE_<name>` when set to a positive finite number, else the default."""
    default = _DEFAULTS[name]
    text = os.environ.get("ARCHPROBE_" + name)
    if text:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not (0 < value < 1e15):
            raise SourceError(f"ARCHPROBE_{name}={text!r}: not a positive number")
        return value if isinstance(default, float) else int(value)
    return default


class Deadline:
    """A point in (monotonic) time after which a command's network reads stop, with one clear error."""

    def __init__(self, seconds: float | None = None, what: str = "reading from the network"):
        self.seconds = float(cap("DEADLINE_S") if seconds is None else seconds)
        self.end = time.monotonic() + self.seconds
        self.what = what

    def left(self) -> float:
        return self.end - time.monotonic()

    def check(self, where: str) -> float:
        """Seconds left; a SourceError once none are."""
        left = self.left()
        if left <= 0:
            raise SourceError(f"{where}: gave up after {self.seconds:g} s {self.what} (the command's deadline)",
                              hint="raise ARCHPROBE_DEADLINE_S, or check the server")
        return left


@contextmanager
def reading_deadline(what: str, seconds: float | None = None):
    """Wall-clock bound on reading a source, local files included: a slow FUSE/NFS file, a sparse file
    whose header walks millions of empty strings, a stalled worker. A SIGALRM timer raises SourceError
    in the main thread, whatever it is doing (a blocked read is interrupted; an uninterruptible one,
    in the kernel's D state, cannot be). Off the main thread, or inside another one, it is a no-op."""
    if (threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer")
            or signal.getitimer(signal.ITIMER_REAL)[0] > 0):
        yield
        return
    seconds = float(cap("DEADLINE_S") if seconds is None else seconds)

    def expired(signum, frame):
        raise SourceError(f"{what}: gave up after {seconds:g} s reading it (the command's deadline)",
                          hint="raise ARCHPROBE_DEADLINE_S, or check the file system or server")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

# diff/compare.py
MAX_FORWARD_TOKENS = 2048   # diff --forward holds T x V logits in float64 on both sides: a longer prompt is refused
