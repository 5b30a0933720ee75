"""Revision forensics on the full K3 checkpoint (sparse: 96 shards, 1.45 TB apparent) against the hub stand-in.

Two revisions of the repo, the second with one shard re-uploaded (its size changed, so the stand-in's digest
for this over-`hash_limit` file changes). Rows: `diff --files-only` (the two tree listings only) and the full
header diff plus the file section; for each, the wall time, the bytes the server sent, and the bytes that a
download of the shards would have moved. Target (issue 28 item 2): the changed shard found, no shard data
sent (the files-only row sends listings only; the header row sends at most the headers).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

from _util import table

from archprobe.writers.synthetic import K3_SHARD_NAME, K3Dims, write_k3_checkpoint


def main() -> None:
    root = os.path.join(tempfile.gettempdir(), "archprobe-bench-k3-forensics")
    v1, v2 = os.path.join(root, "v1"), os.path.join(root, "v2")
    if not os.path.exists(os.path.join(v2, "config.json")):
        print(f"writing sparse K3 checkpoint into {v1} ...", flush=True)
        shutil.rmtree(root, ignore_errors=True)
        write_k3_checkpoint(v1, K3Dims(), shards=96, sparse=True, shard_name=K3_SHARD_NAME)
        os.makedirs(v2)
        for name in os.listdir(v1):
            if name.endswith(".safetensors"):
                os.link(os.path.join(v1, name), os.path.join(v2, name))
            else:
                shutil.copy(os.path.join(v1, name), os.path.join(v2, name))
        changed = sorted(f for f in os.listdir(v2) if f.endswith(".safetensors"))[40]
        os.unlink(os.path.join(v2, changed))
        shutil.copy(os.path.join(v1, changed), os.path.join(v2, changed), follow_symlinks=True)
        with open(os.path.join(v2, changed), "r+b") as f:
            f.truncate(os.path.getsize(os.path.join(v1, changed)) + 2)
    shard_bytes = sum(os.path.getsize(os.path.join(v1, f)) for f in os.listdir(v1) if f.endswith(".safetensors"))

    from tests.support.hub_server import HubServer

    from archprobe.diff.files import add_files, file_diff
    from archprobe.diff.headers import diff_sources

    rows = []
    with HubServer() as server:
        server.add_repo("bench/k3", v1, revision="v1")
        server.add_repo("bench/k3", v2, revision="v2")
        os.environ["HF_ENDPOINT"] = server.url
        for label, run in (("diff --files-only", lambda: file_diff("bench/k3@v1", "bench/k3@v2")),
                           ("diff (headers + files)", lambda: add_files(diff_sources("bench/k3@v1", "bench/k3@v2"),
                                                                        "bench/k3@v1", "bench/k3@v2")["files"])):
            server.served.clear()
            t = time.perf_counter()
            files = run()
            wall = time.perf_counter() - t
            sent = server.bytes_served()
            rows.append([label, f"{wall:.2f} s", f"{sent / 1e6:.2f} MB", f"{2 * shard_bytes / 1e12:.2f} TB",
                         ", ".join(files["shards_changed"])])
    print(table(rows, ["form", "wall", "bytes sent", "a download would move", "shards changed"]))


if __name__ == "__main__":
    main()
