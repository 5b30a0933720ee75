"""Released framework versions, read from the package index without installing anything.

For each framework: the index lists its wheels (formats/pkgindex.py); of each release read, only the
zip's directory and the registry members are fetched by Range (formats/remotezip.py), parsed with ast
(adapt/registries.py), and the model's own code file is searched for the card's features
(adapt/symbols.py). What was read is cached per wheel hash (sha256 from the index), so a second run
reads nothing for releases it has seen.

A release "knows" the checkpoint only when the matching registry entry is the checkpoint's own declared
architecture / model type; a match on the wrapped text model only, through the transformers backend, or
in the list of previously supported architectures says so in `status` and does not count for
`first_release_known`.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from archprobe.adapt import registries as reg
from archprobe.adapt.coverage import HANDLED, MISSING, UNVERIFIED
from archprobe.adapt.symbols import feature_rows
from archprobe.errors import SourceError
from archprobe.formats.limits import MAX_RELEASE_CANDIDATES as MAX_CANDIDATES
from archprobe.formats.pkgindex import IndexFile, project_files, wheel_tags
from archprobe.formats.remotezip import RemoteZip

REGISTERED = "registered"
TEXT_ONLY = "registered for the wrapped text model only"
BACKEND = "via the transformers backend"
PREVIOUSLY = "previously supported"
NOT_REGISTERED = "not registered"
UNREADABLE = "registry unreadable"


@dataclass(frozen=True)
class Spec:
    framework: str     # the name `adapt` uses
    project: str       # the package on the index
    repo: str          # its forge repository


SPECS = {s.framework: s for s in (
    Spec("transformers", "transformers", "huggingface/transformers"),
    Spec("vllm", "vllm", "vllm-project/vllm"),
    Spec("sglang", "sglang", "sgl-project/sglang"),
    Spec("llama.cpp", "gguf", "ggml-org/llama.cpp"),
    Spec("mlx-lm", "mlx-lm", "ml-explore/mlx-lm"),
    Spec("tensorrt-llm", "tensorrt-llm", "NVIDIA/TensorRT-LLM"),
)}


@dataclass
class Target:
    """What a registry is asked about: the checkpoint's own names first, its wrapped text model second."""

    archs: list[str]
    model_type: str
    text_archs: list[str] = field(default_factory=list)
    text_model_type: str | None = None
    moe: bool = False

    @classmethod
    def from_config(cls, config: dict, moe: bool = False) -> Target:
        text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
        archs = [a for a in config.get("architectures") or [] if isinstance(a, str)]
        text_archs = [a for a in text.get("architectures") or [] if isinstance(a, str) and a not in archs]
        tmt = text.get("model_type") if isinstance(text.get("model_type"), str) else None
        return cls(archs, str(config.get("model_type") or ""), text_archs,
                   tmt if tmt != config.get("model_type") else None, moe)

    def keys(self) -> list[str]:
        return [k for k in [self.model_type, self.text_model_type, *map(reg.snake, self.archs + self.text_archs)] if k]


# -- one archive, through the cache ---------------------------------------------------------
def cache_root() -> Path:
    base = os.environ.get("ARCHPROBE_CACHE") or os.path.join(Path.home(), ".cache", "archprobe")
    return Path(base) / "wheels"


class Archive:
    """A wheel's names and members: from the cache when its sha256 was read before, else by Range."""

    def __init__(self, http, f: IndexFile):
        self.http, self.file = http, f
        self._remote: RemoteZip | None = None
        self.dir = cache_root() / f.sha256 if f.sha256 else None
        self._names: list[str] | None = self._cached_names()

    @property
    def bytes_fetched(self) -> int:
        return self._remote.bytes_fetched if self._remote else 0

    @property
    def size(self) -> int | None:
        return self._remote.size if self._remote else self.file.size

    def _zip(self) -> RemoteZip:
        if self._remote is None:
            self._remote = RemoteZip(self.http, self.file.url, self.file.size, self.file.filename)
        return self._remote

    def _cached_names(self) -> list[str] | None:
        if self.dir is None:
            return None
        try:
            names = json.loads((self.dir / "names.json").read_text())
            return names if isinstance(names, list) and all(isinstance(n, str) for n in names) else None
        except (OSError, ValueError):
            return None

    def names(self) -> list[str]:
        if self._names is None:
            self._names = self._zip().names()
            self._store("names.json", json.dumps(self._names).encode())
        return self._names

    def text(self, name: str) -> str | None:
        if name not in set(self.names()):
            return None
        key = "m-" + hashlib.sha256(name.encode()).hexdigest()[:32]
        if self.dir is not None:
            try:
                return (self.dir / key).read_bytes().decode("utf-8", "replace")
            except OSError:
                pass
        data = self._zip().read(name)
        self._store(key, data)
        return data.decode("utf-8", "replace")

    def _store(self, key: str, data: bytes) -> None:
        if self.dir is None:
            return
        try:
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = self.dir / f".{key}.{os.getpid()}"
            tmp.write_bytes(data)
            tmp.replace(self.dir / key)
        except OSError:
            pass   # a cache that cannot be written only costs a re-read


# -- per framework: which members, and what they say ----------------------------------------
@dataclass
class Verdict:
    status: str
    known_as: str | None = None
    counts: bool = False
    code: dict[str, str] = field(default_factory=dict)
    note: str | None = None


def _first_match(target: Target, table) -> tuple[str, bool] | None:
    for a in target.archs:
        if a in table:
            return a, True
    for a in target.text_archs:
        if a in table:
            return a, False
    return None


def _own(match: tuple[str, bool]) -> tuple[str, bool]:
    return (REGISTERED, True) if match[1] else (TEXT_ONLY, False)


def _code(ar: Archive, names: list[str]) -> dict[str, str]:
    out = {}
    for n in names:
        text = ar.text(n)
        if text is not None:
            out[n] = text
    return out


def judge_vllm(ar: Archive, target: Target) -> Verdict:
    names = set(ar.names())
    path = next((p for p in ("vllm/model_executor/models/registry.py", "vllm/model_executor/models/__init__.py")
                 if p in names), None)
    table = reg.vllm_registry(ar.text(path)) if path else None
    if table is None:
        return Verdict(UNREADABLE, note="no `_..._MODELS` registry in vllm/model_executor/models/")
    m = _first_match(target, table["native"])
    if m:
        status, counts = _own(m)
        files = module_files(ar.names(), table["native"][m[0]], "vllm/model_executor/models")
        return Verdict(status, m[0], counts, _code(ar, files))
    m = _first_match(target, table["backend"])
    if m:
        return Verdict(BACKEND, m[0], False, note="listed to run through vLLM's transformers backend")
    m = _first_match(target, table["previously"])
    if m:
        return Verdict(f"{PREVIOUSLY} (last in {table['previously'][m[0]]})", m[0], False)
    return Verdict(NOT_REGISTERED)


def module_files(names: list[str], module: str, base: str) -> list[str]:
    """The files of a registry's module: `kimi_linear` is base/kimi_linear.py; an absolute `vllm.models.kimi_k3`
    is that file, or that package's __init__ and its model files (at most MAX_CANDIDATES)."""
    path = module.replace(".", "/") if "." in module else f"{base}/{module}"
    if path + ".py" in names:
        return [path + ".py"]
    inside = [n for n in names if n.startswith(path + "/") and n.endswith(".py")]
    model = [n for n in inside if n.rsplit("/", 1)[-1] in ("__init__.py", "model.py")
             or n.rsplit("/", 1)[-1].startswith("modeling")]
    return sorted(model, key=lambda n: (n.count("/"), n))[:MAX_CANDIDATES]


def _stems(names: list[str], prefix: str, strip: str = "") -> dict[str, str]:
    out = {}
    for n in names:
        rest = n[len(prefix):]
        if n.startswith(prefix) and rest.endswith(".py") and "/" not in rest and rest.startswith(strip):
            out[rest[len(strip):-3]] = n
    return out


def judge_sglang(ar: Archive, target: Target) -> Verdict:
    stems = _stems(ar.names(), "sglang/srt/models/")
    if not stems:
        return Verdict(UNREADABLE, note="no sglang/srt/models/*.py in this wheel")
    files = [stems[s] for s in reg.candidate_stems(list(stems), target.keys(), MAX_CANDIDATES)]
    registered: dict[str, str] = {}
    for f in files:
        for cls in reg.entry_classes(ar.text(f) or ""):
            registered.setdefault(cls, f)
    m = _first_match(target, registered)
    if m is None:
        return Verdict(NOT_REGISTERED, note=f"EntryClass read in {len(files)} likely model file(s)")
    status, counts = _own(m)
    return Verdict(status, m[0], counts, _code(ar, [registered[m[0]]]))


def judge_transformers(ar: Archive, target: Target) -> Verdict:
    names = set(ar.names())
    auto = "transformers/models/auto/"
    modeling = ar.text(auto + "modeling_auto.py")
    if modeling is None:
        return Verdict(UNREADABLE, note="no models/auto/modeling_auto.py")
    classes = {c for table in reg.transformers_mappings(modeling).values() for v in table.values() for c in v}
    types: set[str] = set()
    for f in ("configuration_auto.py", "auto_mappings.py"):
        text = ar.text(auto + f) if auto + f in names else None
        if text:
            types |= set(reg.transformers_mappings(text, "CONFIG_MAPPING_NAMES").get("CONFIG_MAPPING_NAMES", {}))
    m = _first_match(target, classes)
    if m is None:
        if target.model_type in types:
            m = (target.model_type, True)
        elif target.text_model_type and target.text_model_type in types:
            m = (target.text_model_type, False)
    if m is None:
        return Verdict(NOT_REGISTERED)
    status, counts = _own(m)
    mt = target.model_type if m[1] else (target.text_model_type or target.model_type)
    folder = mt.replace("-", "_")
    return Verdict(status, m[0], counts, _code(ar, [f"transformers/models/{folder}/modeling_{folder}.py"]))


def judge_gguf(ar: Archive, target: Target) -> Verdict:
    from archprobe.adapt.llamacpp import arch_name

    text = ar.text("gguf/constants.py")
    consts = reg.gguf_constants(text) if text else None
    if consts is None:
        return Verdict(UNREADABLE, note="no MODEL_ARCH_NAMES in gguf/constants.py")
    names = set(consts["names"].values())
    own = arch_name(target.model_type, target.moe, names) if target.model_type else None
    wrapped = arch_name(target.text_model_type, target.moe, names) if target.text_model_type and not own else None
    arch = own or wrapped
    if arch is None:
        return Verdict(NOT_REGISTERED, note="no GGUF architecture for the model type (names as llama.cpp's "
                                            "converter writes them)")
    enum = next(k for k, v in consts["names"].items() if v == arch)
    kinds = consts["tensors"].get(enum, [])
    code = {"gguf/constants.py MODEL_TENSORS": " ".join(kinds)} if kinds else {}
    return Verdict(REGISTERED if own else TEXT_ONLY, arch, bool(own), code)


def judge_mlx(ar: Archive, target: Target) -> Verdict:
    stems = _stems(ar.names(), "mlx_lm/models/")
    if not stems:
        return Verdict(UNREADABLE, note="no mlx_lm/models/*.py in this wheel")
    remap = reg.mlx_remapping(ar.text("mlx_lm/utils.py") or "")
    for mt, own in ((target.model_type, True), (target.text_model_type, False)):
        if mt and remap.get(mt, mt) in stems:
            stem = remap.get(mt, mt)
            return Verdict(REGISTERED if own else TEXT_ONLY, stem, own, _code(ar, [stems[stem]]))
    return Verdict(NOT_REGISTERED)


def judge_trtllm(ar: Archive, target: Target) -> Verdict:
    names = ar.names()
    registered: dict[str, str | None] = dict.fromkeys(reg.trtllm_model_map(ar.text("tensorrt_llm/models/__init__.py")
                                                                           or ""))
    stems = _stems(names, "tensorrt_llm/_torch/models/", "modeling_")
    for s in reg.candidate_stems(list(stems), target.keys(), MAX_CANDIDATES):
        for arch in reg.trtllm_registered(ar.text(stems[s]) or ""):
            registered[arch] = stems[s]
    if not registered:
        return Verdict(UNREADABLE, note="neither MODEL_MAP nor @register_auto_model found")
    m = _first_match(target, registered)
    if m is None:
        return Verdict(NOT_REGISTERED)
    status, counts = _own(m)
    return Verdict(status, m[0], counts, _code(ar, [registered[m[0]]] if registered[m[0]] else []))


JUDGES = {"vllm": judge_vllm, "sglang": judge_sglang, "transformers": judge_transformers, "llama.cpp": judge_gguf,
          "mlx-lm": judge_mlx, "tensorrt-llm": judge_trtllm}


# -- releases -------------------------------------------------------------------------------
def pick_wheels(files: list[IndexFile], pre: bool = False) -> list[IndexFile]:
    """One wheel per release, newest first: pure-Python tags, then manylinux x86_64, then any; yanked and
    (unless `pre`) pre-releases left out, as pip leaves them out."""
    from packaging.version import InvalidVersion, Version

    by_version: dict = {}
    for f in files:
        if f.yanked:
            continue
        try:
            v = Version(f.version)
        except InvalidVersion:
            continue
        if v.is_prerelease and not pre:
            continue
        by_version.setdefault(v, []).append(f)

    def preference(f: IndexFile):
        _, _, plat = wheel_tags(f.filename)
        return (0 if plat == "any" else 1 if "manylinux" in plat and "x86_64" in plat else 2, f.filename)

    return [sorted(by_version[v], key=preference)[0] for v in sorted(by_version, reverse=True)]


def read_release(http, f: IndexFile, spec: Spec, target: Target, features: list[dict]) -> tuple[dict, bool]:
    """(the release row, whether it knows the checkpoint)."""
    ar = Archive(http, f)
    verdict = JUDGES[spec.framework](ar, target)
    if verdict.known_as is not None:
        rows = feature_rows(features, verdict.code, ar.names())
    else:
        rows = [{"feature": x["id"], "status": UNVERIFIED, "why": "not registered"} for x in features]
    row = {"version": f.version, "source": "index", "status": verdict.status, "known_as": verdict.known_as,
           "handled": [r["feature"] for r in rows if r["status"] == HANDLED],
           "missing": [r["feature"] for r in rows if r["status"] == MISSING],
           "unverified": [r["feature"] for r in rows if r["status"] == UNVERIFIED],
           "bytes_fetched": ar.bytes_fetched, "file_bytes": ar.size or 0, "file": f.filename,
           "features": rows, "note": verdict.note}
    return row, verdict.counts


def _read(http, f: IndexFile, spec: Spec, target: Target, features: list[dict]) -> tuple[dict, bool]:
    """read_release; a connection failure once the index answered is an error about that wheel, not 'offline'."""
    from archprobe.formats.http import TransientError

    try:
        return read_release(http, f, spec, target, features)
    except TransientError as exc:
        raise SourceError(f"{f.filename}: {exc.message}") from None


def framework_releases(http, base: str, spec: Spec, target: Target, features: list[dict], newest: int,
                       pool: ThreadPoolExecutor, progress=None) -> dict:
    """{"releases": [...newest first], "first_release_known": str|None, "notes": [...]} for one framework."""
    wheels = pick_wheels(project_files(http, base, spec.project))
    if not wheels:
        return {"releases": [], "first_release_known": None,
                "notes": [f"the index lists no wheels of {spec.project}"]}
    chosen = wheels[:newest]
    results = list(pool.map(lambda f: _read(http, f, spec, target, features), chosen))
    if progress:
        progress(len(chosen))
    rows = {r["version"]: (r, known) for r, known in results}
    notes = []
    older = wheels[len(chosen):]
    if older and results and results[-1][1]:
        # the oldest release read knows it: bisect the older ones (support, once added, is assumed to stay)
        lo, hi = 0, len(older)   # older[lo:hi] undecided; older is newest first
        while lo < hi:
            mid = (lo + hi) // 2
            r, known = _read(http, older[mid], spec, target, features)
            rows[r["version"]] = (r, known)
            if known:
                lo = mid + 1
            else:
                hi = mid
        notes.append(f"first release found by bisecting {len(older)} older release(s) (support assumed to stay "
                     "once added)")
    ordered = [rows[w.version] for w in wheels if w.version in rows]
    known = [r["version"] for r, k in ordered if k]
    return {"releases": [r for r, _ in ordered], "first_release_known": known[-1] if known else None,
            "notes": notes}


def check_source(where: str, exc: SourceError) -> SourceError:
    return SourceError(f"{where}: {exc.message}", hint=exc.hint)
