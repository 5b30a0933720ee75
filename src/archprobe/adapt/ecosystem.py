"""The ecosystem view of `adapt`: released versions from the package index and work in progress upstream,
added to each framework's installed view (which stays, marked `"source": "installed"`).

Offline (the index cannot be reached) is one warning line and the installed view as it was; a forge
that cannot be reached or is rate-limited is one line too, and keeps what was read. Hostile answers
are SourceErrors, one line, as everywhere in formats/.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from archprobe.adapt.releases import SPECS, Target, framework_releases
from archprobe.adapt.result import not_installed, unknown
from archprobe.errors import SourceError
from archprobe.formats.http import GuardedHTTP, TransientError
from archprobe.formats.limits import Deadline

WORKERS = 6


@dataclass
class Ecosystem:
    index_url: str | None = None   # None: --index-url / PIP_INDEX_URL / the public index
    forge_url: str | None = None   # None: GITHUB_API_URL / the public API
    releases: int = 10             # newest releases read per framework (older ones only to find the first)
    upstream: bool = True


def upstream_terms(doc: dict, config: dict, source: str | None) -> list[str]:
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    terms = [*(config.get("architectures") or []), config.get("model_type"), *(text.get("architectures") or []),
             text.get("model_type")]
    if source and not os.path.exists(source) and source.count("/") == 1:
        terms.append(source.split("/")[1])   # a hub repo id: its model name
    return [t for t in dict.fromkeys(t for t in terms if isinstance(t, str) and t.strip())]


def add_ecosystem(adoc: dict, config: dict, features: list[dict], moe: bool, eco: Ecosystem, source: str | None,
                  only: list[str] | None = None, progress=None) -> dict:
    """Fill `releases`, `first_release_known` and `upstream` into every framework of an adapt document."""
    from archprobe.formats.forge import api_url, forge_headers
    from archprobe.formats.pkgindex import ACCEPT, index_url

    base = index_url(eco.index_url)
    warnings: list[str] = []
    target = Target.from_config(config, moe)
    by_name = {r["framework"]: r for r in adoc["frameworks"]}
    for r in adoc["frameworks"]:
        r.setdefault("source", "installed")
    for name in SPECS:
        if name not in by_name and (not only or name in only):
            entry = _uninstalled_probe(name)
            adoc["frameworks"].append(entry)
            by_name[name] = entry
    wanted = [n for n in SPECS if n in by_name]
    http = GuardedHTTP(Deadline(), {"Accept": ACCEPT, "User-Agent": "archprobe"})
    offline = False
    done = [0]

    def tick(n: int) -> None:
        done[0] += n
        if progress:
            progress(done[0], len(wanted) * eco.releases)

    with ThreadPoolExecutor(WORKERS) as pool:
        for name in wanted:
            entry = by_name[name]
            entry.update({"releases": [], "first_release_known": None, "upstream": []})
            if offline:
                continue
            try:
                got = framework_releases(http, base, SPECS[name], target, features, eco.releases, pool, tick)
            except TransientError as exc:
                warnings.append(f"offline: the package index {base} cannot be reached ({exc.message}); "
                                "showing the installed view only")
                offline = True
                continue
            except SourceError as exc:
                raise SourceError(f"{name} releases: {exc.message}", hint=exc.hint) from None
            entry["releases"], entry["first_release_known"] = got["releases"], got["first_release_known"]
            entry["notes"] = list(entry.get("notes", [])) + got["notes"]
    http.close()
    if eco.upstream and not offline:
        _add_upstream(adoc, wanted, by_name, upstream_terms(adoc, config, source), api_url(eco.forge_url),
                      forge_headers(), warnings)
    adoc["ecosystem"] = {"index_url": base, "forge_url": api_url(eco.forge_url) if eco.upstream else None,
                         "offline": offline, "warnings": warnings}
    return adoc


def _add_upstream(adoc, wanted, by_name, terms, api, headers, warnings) -> None:
    from archprobe.formats.forge import search

    if not terms:
        return
    http = GuardedHTTP(Deadline(), headers)
    try:
        for name in wanted:
            repo = SPECS[name].repo
            try:
                found = search(http, api, repo, terms)
            except TransientError as exc:
                warnings.append(f"upstream: the forge {api} cannot be reached ({exc.message}); no pull requests "
                                "or issues shown")
                return
            except SourceError as exc:
                raise SourceError(f"{name} upstream ({repo}): {exc.message}", hint=exc.hint) from None
            by_name[name]["upstream"] = [{"repo": repo, **item} for item in found.items]
            if found.stopped:
                warnings.append(f"upstream {repo}: {found.stopped}")
                if "rate-limited" in found.stopped:
                    rest = wanted[wanted.index(name) + 1:]
                    if rest:
                        warnings.append(f"upstream: not searched while rate-limited: {', '.join(rest)}")
                    return
    finally:
        http.close()


def _uninstalled_probe(name: str) -> dict:
    """Frameworks with no installed probe (MLX-LM, TensorRT-LLM): say which view this is."""
    import importlib.util

    module = {"mlx-lm": "mlx_lm", "tensorrt-llm": "tensorrt_llm"}.get(name, name)
    try:
        present = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        present = False
    if present:
        entry = unknown(name, None, "installed, but archprobe has no installed-package probe for it; see releases")
    else:
        entry = not_installed(name, f"pip install {SPECS[name].project}")
    entry["source"] = "installed"
    return entry
