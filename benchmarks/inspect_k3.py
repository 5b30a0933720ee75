"""Inspecting the full K3 checkpoint (sparse: 96 shards, 497,220 tensors, 1.45 TB apparent).

Rows, timed round-robin (each round runs every form once, so a slow minute slows all alike):
the floor (plain `json.loads` of every header, in-process), `archprobe inspect --json` end to end as
a process (start-up included), its CPU seconds (process and header workers: what the run costs on a
quiet machine, whatever the load now), remote inspection against the local hub stand-in, and
`huggingface_hub.get_safetensors_metadata` on the same server.
Targets (issue 17 item 3): end-to-end <= 1.5x the floor; remote: the index not fetched when the
listing names the shards, every byte sent <= 1.05x the header bytes, <= 0.4x get_safetensors_metadata's time.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile

from _util import paired_ratio, round_robin, table

from archprobe.writers.synthetic import K3_SHARD_NAME, K3Dims, write_k3_checkpoint


def main() -> None:
    rounds = int(os.environ.get("BENCH_REPEAT", "5"))
    cache = os.path.join(tempfile.gettempdir(), "archprobe-bench-k3-published-names")
    if not os.path.exists(os.path.join(cache, "config.json")):
        print(f"writing sparse K3 checkpoint (its published shard names) into {cache} ...", flush=True)
        write_k3_checkpoint(cache, K3Dims(), shards=96, sparse=True, shard_name=K3_SHARD_NAME)
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

    exe = [sys.executable, "-m", "archprobe.cli.main", "inspect", cache, "--json"]
    cpu: list[float] = []
    floor_cpu: list[float] = []
    out: dict = {}

    def cli():
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out["doc"] = json.loads(subprocess.run(exe, capture_output=True, check=True).stdout)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)

    def floor_timed():
        import time

        t = time.process_time()
        floor()
        floor_cpu.append(time.process_time() - t)

    from tests.support.hub_server import HubServer

    with HubServer() as server, tempfile.TemporaryDirectory() as hf_home:
        server.add_repo("bench/k3", cache)
        os.environ["HF_ENDPOINT"] = server.url
        os.environ["HF_HOME"] = hf_home
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        from huggingface_hub import HfApi

        from archprobe.structure.inspect import inspect_checkpoint

        api = HfApi(endpoint=server.url)
        served: list[int] = []

        def remote():
            start = len(server.served)
            out["remote"] = inspect_checkpoint("bench/k3")
            served.append(sum(n for _, _, n in server.served[start:]))
            out["paths"] = [p for _, p, _ in server.served[start:]]

        timed = round_robin({"floor": floor_timed, "cli": cli, "remote": remote,
                             "hf": lambda: api.get_safetensors_metadata("bench/k3")}, rounds)
    doc = out["doc"]
    read = doc["storage"]["header_bytes_read"]
    t = {k: v[0] for k, v in timed.items()}
    cpu_ratio = sorted(c / f for c, f in zip(cpu[-rounds:], floor_cpu[-rounds:], strict=True))[rounds // 2]
    rows = [["json.loads of every header (floor)", f"{t['floor']:.3f}", "1.00", f"{header_bytes:,}"],
            ["archprobe inspect --json (process)", f"{t['cli']:.3f}", f"{paired_ratio(timed, 'cli', 'floor'):.2f}",
             f"{read:,}"],
            ["  the same, CPU seconds (process + workers)", f"{sorted(cpu)[len(cpu) // 2]:.3f}", f"{cpu_ratio:.2f}",
             "(vs the floor's CPU seconds)"],
            ["archprobe inspect bench/k3 (local hub)", f"{t['remote']:.3f}",
             f"{paired_ratio(timed, 'remote', 'floor'):.2f}", f"{sorted(served)[len(served) // 2]:,} (all bytes)"],
            ["huggingface_hub.get_safetensors_metadata", f"{t['hf']:.3f}", f"{paired_ratio(timed, 'hf', 'floor'):.2f}",
             "-"]]
    print(table(rows, ["what", "seconds (median)", "x floor (paired)", "bytes"]))
    index_fetched = any(p.endswith("model.safetensors.index.json") for p in out["paths"])
    print(f"\nheaders: {header_bytes:,} bytes in {len(shards)} shards; tensors {doc['storage']['tensors']:,}; "
          f"params total {doc['params']['total']:,}, active {doc['params']['active']:,}")
    print(f"end-to-end / floor = {paired_ratio(timed, 'cli', 'floor'):.2f} (target <= 1.5); load now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"local header bytes read / header bytes = {read / header_bytes:.3f} (target <= 1.05)")
    print(f"remote: every byte sent / header bytes = {sorted(served)[len(served) // 2] / header_bytes:.3f} "
          f"(target <= 1.05); index.json fetched: {index_fetched}")
    print(f"remote: archprobe / get_safetensors_metadata = {paired_ratio(timed, 'remote', 'hf'):.2f} (target <= 0.4)")
    assert out["remote"]["params"] == doc["params"]


if __name__ == "__main__":
    main()
