"""The Ray executor: each attempt is a Ray task running the same `run_attempt` as the local one.

`ray.init()` starts a local Ray when RAY_ADDRESS is unset; with RAY_ADDRESS it joins that cluster
(the workers need archprobe installed). The ledger stays with the driver: workers only return results.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import asdict

from archprobe.errors import ArchprobeError
from archprobe.eval.attempt import AttemptResult, AttemptSpec, run_attempt

_remote = None


def _attempt_in_worker(spec: dict) -> dict:
    return asyncio.run(run_attempt(AttemptSpec(**spec))).to_dict()


def ensure_ray():
    global _remote
    try:
        import ray
    except ImportError:
        raise ArchprobeError("the ray executor needs Ray", hint="pip install 'archprobe[eval-ray]' (or ray)") from None
    if not ray.is_initialized():
        address = os.environ.get("RAY_ADDRESS")
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 **({} if address else {"num_cpus": max(2, os.cpu_count() or 2)}))
    if _remote is None:
        _remote = ray.remote(max_retries=0)(_attempt_in_worker)   # our retries are ledger rows, not Ray's
    return _remote


async def ray_execute(spec: AttemptSpec, client=None, hooks=None) -> AttemptResult:
    remote = ensure_ray()
    result = await asyncio.wrap_future(remote.remote(asdict(spec)).future())
    return AttemptResult(**result)
