"""Inspecting the full K3 checkpoint (sparse: 96 shards, 497,220 tensors, 1.45 TB apparent).

Rows: the floor (plain `json.loads` of every header, in-process), `archprobe inspect --json` end to
end as a process (startup included), and remote inspection against the local hub stand-in, next
to `huggingface_hub.get_safetensors_metadata` on the same server.
Targets (issue 2): end-to-end <= 1.5x the floor; header bytes read <= 1.05x the header bytes;
remote faster than get_safetensors_metadata.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from _util import table, timed

from archprobe.synthetic import K3Dims, write_k3_checkpoint


def main() -> None:
    repeat = int(os.environ.get("BENCH_REPEAT", "5"))
    cache = os.path.join(tempfile.gettempdir(), "archprobe-bench-k3")
    if not os.path.exists(os.path.join(cache, "config.json")):
        print(f"writing sparse K3 checkpoint into {cache} ...", flush=True)
        write_k3_checkpoint(cache, K3Dims(), shards=96, sparse=True)
    shards = sorted(f for f in os.listdir(cache) if f.endswith(".safetensors"))
    header_bytes = 0
    for s in shards:
        with open(os.path.join(cache, s), "rb") as f:
            header_bytes += 8 + int.from_bytes(f.read(8), "little")

    def floor():
        for s in shards:
            with open(os.path.join(cache, s), "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                json.loads(f.read(n))

    def floor_no_gc():
        import gc

        gc.disable()
        try:
            floor()
        finally:
            gc.enable()

    exe = [sys.executable, "-m", "archprobe.cli.main", "inspect", cache, "--json"]

    def cli():
        out = subprocess.run(exe, capture_output=True, check=True).stdout
        return json.loads(out)

    t_floor, _ = timed(floor, repeat)
    t_floor_ng, _ = timed(floor_no_gc, repeat)
    t_cli, doc = timed(cli, repeat)
    read = doc["storage"]["header_bytes_read"]
    rows = [["json.loads of every header (floor)", f"{t_floor:.3f}", "1.00", f"{header_bytes:,}"],
            ["json.loads of every header, GC off", f"{t_floor_ng:.3f}", f"{t_floor_ng / t_floor:.2f}",
             f"{header_bytes:,}"],
            ["archprobe inspect --json (process)", f"{t_cli:.3f}", f"{t_cli / t_floor:.2f}", f"{read:,}"]]

    from tests.support.hub_server import HubServer

    with HubServer() as server, tempfile.TemporaryDirectory() as hf_home:
        server.add_repo("bench/k3", cache)
        os.environ["HF_ENDPOINT"] = server.url
        os.environ["HF_HOME"] = hf_home
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        from huggingface_hub import HfApi

        from archprobe.structure.inspect import inspect_checkpoint

        before = server.bytes_served()
        t_remote, rdoc = timed(lambda: inspect_checkpoint("bench/k3"), max(1, repeat // 2))
        runs = max(1, repeat // 2) + 1
        shard_served = server.bytes_served(lambda p: p.endswith(".safetensors")) // runs
        api = HfApi(endpoint=server.url)
        t_hf, _ = timed(lambda: api.get_safetensors_metadata("bench/k3"), max(1, repeat // 2))
        rows.append(["archprobe inspect bench/k3 (local hub)", f"{t_remote:.3f}", f"{t_remote / t_floor:.2f}",
                     f"{shard_served:,}"])
        rows.append(["huggingface_hub.get_safetensors_metadata", f"{t_hf:.3f}", f"{t_hf / t_floor:.2f}", "-"])
        del before
    print(table(rows, ["what", "seconds (median)", "x floor", "header bytes read"]))
    print(f"\nheaders: {header_bytes:,} bytes in {len(shards)} shards; tensors {doc['storage']['tensors']:,}; "
          f"params total {doc['params']['total']:,}, active {doc['params']['active']:,}")
    print(f"end-to-end / floor = {t_cli / t_floor:.2f} (target <= 1.5); "
          f"vs the GC-off floor {t_cli / t_floor_ng:.2f}")
    print(f"local header bytes read / header bytes = {read / header_bytes:.3f} (target <= 1.05)")
    print(f"remote shard bytes served / header bytes = {shard_served / header_bytes:.3f}")
    print(f"remote: archprobe {t_remote:.2f} s vs get_safetensors_metadata {t_hf:.2f} s "
          f"= {t_hf / t_remote:.1f}x faster (target > 1)")
    assert rdoc["params"] == doc["params"]


if __name__ == "__main__":
    main()
