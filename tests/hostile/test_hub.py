"""A hostile hub on 127.0.0.1: infinite and dripping bodies, stalled headers, endless pages, Range
ignored or answered wrongly, lying Content-Length, redirect loops, listed paths leaving the repo.
`inspect`, `validate`'s fetch and `track` read through the same guard; each case runs the real CLI
with short deadlines (ARCHPROBE_DEADLINE_S=4, ARCHPROBE_REQUEST_DEADLINE_S=3) and must end within
them, in bounded memory, with one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from tests.support import hub_server as hs
from tests.support.cli import FAST_ENV, assert_bounded, run_cli

REPO = "org/m"
SHARD = "model-00001-of-00002.safetensors"


@pytest.fixture
def hub(tmp_path):
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 1}))
    save_file({"model.embed_tokens.weight": np.zeros((16, 8), np.float32)}, str(folder / SHARD))
    save_file({"model.layers.0.mlp.up_proj.weight": np.zeros((8, 8), np.float32)},
              str(folder / "model-00002-of-00002.safetensors"))
    with hs.HubServer() as server:
        server.add_repo(REPO, str(folder))
        yield server, folder


def inspect(server, *extra, env=None):
    return run_cli("inspect", REPO, "--json", *extra, env={"HF_ENDPOINT": server.url, **FAST_ENV, **(env or {})})


def test_the_guarded_path_reads_a_good_repo(hub):
    server, _ = hub
    r = inspect(server)
    assert_bounded(r, ok=True)
    assert json.loads(r.stdout)["storage"]["files"] == 2


@pytest.mark.parametrize("target", ["config.json", SHARD])
def test_infinite_body_is_cut_at_the_cap(hub, target):
    server, _ = hub
    server.hooks[f"/{REPO}/resolve/main/{target}"] = hs.infinite_body
    r = inspect(server, env={"ARCHPROBE_MAX_CONFIG_BYTES": str(2**20)})
    assert_bounded(r, ok=False, rss=300 * 2**20, wall_s=15)


@pytest.mark.parametrize("hook", [hs.drip(0.2), hs.stall_headers], ids=["drip", "stalled-headers"])
def test_slow_servers_stop_at_the_deadline(hub, hook):
    server, _ = hub
    server.hooks[f"/{REPO}/resolve/main/config.json"] = hook
    r = inspect(server)
    assert_bounded(r, ok=False, wall_s=12)   # 4 s deadline + start-up, never "for ever"
    assert "deadline" in r.stderr or "within" in r.stderr


def test_endless_pages_stop_at_the_page_cap(hub):
    server, _ = hub
    server.hooks[f"/api/models/{REPO}/tree/main"] = hs.endless_pages([{"type": "file", "path": "config.json"}])
    r = inspect(server, env={"ARCHPROBE_MAX_LISTING_PAGES": "50", "ARCHPROBE_DEADLINE_S": "20"})
    assert_bounded(r, ok=False, contains="pages", wall_s=25)
    assert len([p for _, p, _ in server.served if "/tree/" in p]) <= 50


def test_range_ignored_reads_only_what_it_needs(hub):
    server, folder = hub
    server.hooks[f"/{REPO}/resolve/main/{SHARD}"] = hs.ignore_range(str(folder), SHARD, pad=50 * 2**20)
    r = inspect(server)
    assert_bounded(r, ok=True, rss=300 * 2**20)


@pytest.mark.parametrize("hook", [hs.lying_length(8, b"abc"), hs.lying_length(8, b"\x10" + b"\0" * 7, 206,
                                                                               "bytes 3-10/100"),
                                  hs.lying_length(3, b"\x10\0\0" + b"A" * 100000, 206, "bytes 0-7/100")],
                         ids=["short-body", "wrong-content-range", "long-body"])
def test_lying_answers_to_range_requests(hub, hook):
    server, _ = hub
    server.hooks[f"/{REPO}/resolve/main/{SHARD}"] = hook
    assert_bounded(inspect(server), ok=False, wall_s=15)


def test_redirect_loops_are_cut(hub):
    server, _ = hub
    server.hooks[f"/{REPO}/resolve/main/config.json"] = hs.redirect_to(f"/{REPO}/resolve/main/config.json")
    assert_bounded(inspect(server), ok=False, contains="redirects")
    server.hooks[f"/{REPO}/resolve/main/config.json"] = hs.redirect_to("file:///etc/passwd")
    assert_bounded(inspect(server), ok=False, contains="non-HTTP")


@pytest.mark.parametrize("path", ["../../../etc/x.gguf", "/etc/x.gguf", "a/../../x.safetensors", "a\\..\\x.gguf",
                                  "x\u0000.gguf", "ok/./x.gguf"])
def test_listed_paths_leaving_the_repo_are_refused(hub, path):
    server, _ = hub
    server.listing_extra[REPO] = [{"type": "file", "path": path, "size": 10}]
    assert_bounded(inspect(server), ok=False, contains="listing")


def test_validate_fetch_is_capped_by_the_listed_size(hub, tmp_path):
    server, _ = hub
    server.hooks[f"/{REPO}/resolve/main/{SHARD}"] = hs.infinite_body
    r = run_cli("validate", REPO, "--prompt-ids", "1", "--json",
                env={"HF_ENDPOINT": server.url, "ARCHPROBE_CACHE": str(tmp_path / "cache"), **FAST_ENV})
    assert_bounded(r, ok=False, rss=1500 * 2**20, wall_s=60)   # torch is imported: a larger floor


def test_track_reach_with_a_hostile_model_info(hub, tmp_path):
    server, _ = hub
    server.hooks[f"/api/models/{REPO}"] = hs.infinite_body
    r = run_cli("track", "reach", REPO, "--ledger", str(tmp_path / "l.sqlite"),
                env={"HF_ENDPOINT": server.url, **FAST_ENV, "ARCHPROBE_MAX_LISTING_BYTES": str(2**20)})
    assert_bounded(r, ok=False, rss=300 * 2**20)
    r = run_cli("track", "reach", REPO, "--ledger", str(tmp_path / "l.sqlite"),
                env={"HF_ENDPOINT": "http://127.0.0.1:9", **FAST_ENV})      # nothing listens: offline
    assert_bounded(r, ok=False)


def test_track_usage_with_a_dripping_metrics_server(hub, tmp_path):
    server, _ = hub
    server.hooks["/metrics"] = hs.drip(0.5, b"vllm:x_total 1\n" * 1000)
    r = run_cli("track", "usage", server.url + "/metrics", "--subject", "s", "--ledger", str(tmp_path / "l.sqlite"),
                env=FAST_ENV)
    assert_bounded(r, ok=False, wall_s=12)   # the scrape's deadline: 10 s, or ARCHPROBE_DEADLINE_S if shorter
