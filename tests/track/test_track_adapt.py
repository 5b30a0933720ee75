"""`track adapt`: adaptation signals into the ledger as their own kind, never combined with reach/usage."""

from __future__ import annotations

import json

import pytest

from archprobe.errors import ArchprobeError
from archprobe.eval.ledger import Ledger
from archprobe.track.ratio import ratio
from archprobe.track.store import record, series
from tests.support.cli import run
from tests.support.index_server import ForgeServer, IndexServer
from tests.support.release_fixtures import populate, populate_forge


def test_track_adapt_records_its_own_kind_and_show_keeps_it_apart(tmp_path):
    book = tmp_path / "ledger.sqlite"
    env = {"ARCHPROBE_CACHE": str(tmp_path / "cache")}
    with IndexServer() as index, ForgeServer(limit_once=None) as forge:
        populate(index)
        populate_forge(forge)
        env["GITHUB_API_URL"] = forge.url
        r = run("track", "adapt", "--index-url", index.url + "/simple", "--subject", "k3", "--ledger", str(book),
                "--json", env=env)
        assert r.returncode == 0, r.stderr
        index.add("sglang", "0.6.0", {"sglang/srt/models/kimi_k3.py": "EntryClass = KimiK3ForConditionalGeneration\n"})
        r2 = run("track", "adapt", "--index-url", index.url + "/simple", "--subject", "k3", "--ledger", str(book),
                 env=env)
        assert r2.returncode == 0, r2.stderr
    snap = json.loads(r.stdout)
    assert snap["kind"] == "adaptation"
    metrics = {(m["metric"], m["labels"].get("framework"), m["labels"].get("version")): m["value"]
               for m in snap["metrics"]}
    assert metrics[("registered", "vllm", "0.11.0")] == 1.0 and metrics[("registered", "vllm", "0.10.0")] == 0.0
    assert metrics[("upstream_merged_prs", "vllm", None)] == 1.0
    assert metrics[("upstream_draft_prs", "vllm", None)] == 1.0
    shown = run("track", "show", "k3", "--ledger", str(book), "--json")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["reach"] == [] and doc["usage"] == [] and doc["adaptation"]
    knowing = [s for s in doc["adaptation"]
               if s["metric"] == "releases_knowing" and s["labels"] == {"framework": "sglang"}]
    assert [p[1] for p in knowing[0]["points"]] == [0.0, 1.0]   # support landed between the two snapshots


def test_adaptation_is_never_combined_with_reach(tmp_path):
    book = Ledger(tmp_path / "l.sqlite")
    record(book, "reach", "k3", "hub", [("downloads_30d", 10.0)])
    record(book, "adaptation", "k3", "index", [("releases_knowing", 2.0, {"framework": "vllm"})])
    all_series = series(book, "k3")
    assert {s["kind"] for s in all_series} == {"reach", "adaptation"}
    with pytest.raises(ArchprobeError) as info:
        ratio(all_series, "releases_knowing/downloads_30d")
    assert "adaptation" in info.value.message and "reach" in info.value.message
