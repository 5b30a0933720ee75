"""Size against time (real CLI, child process): `eval report` on a run of 50,000 tasks is linear (it was
O(tasks x slots)); `track show --plot` over 5,000 series draws a capped number of panels and says how many
it left out (one panel per series was killed after 90 s)."""

from __future__ import annotations

import json
import time

from archprobe.eval.ledger import Ledger
from archprobe.track.store import record
from tests.support.cli import assert_bounded, run_cli


def test_eval_report_of_50000_tasks_is_linear(tmp_path):
    book = Ledger(tmp_path / "l.sqlite")
    book.create_run("big", source="archprobe", task_set_hash="sha256:x", task_set_path="x", model="m",
                    endpoint="http://127.0.0.1:9/v1", attempts_per_task=1, params={"max_retries": 0},
                    tasks=[(f"t{i}", {"prompt": "p"}) for i in range(50_000)])
    book.close()
    start = time.monotonic()
    r = run_cli("eval", "report", "big", "--ledger", str(tmp_path / "l.sqlite"), "--json")
    assert_bounded(r, ok=True, wall_s=40, rss=800 * 2**20)
    assert json.loads(r.stdout)["unsettled_slots"] == 50_000
    assert time.monotonic() - start < 40


def test_track_show_plot_is_capped_and_says_what_it_left_out(tmp_path):
    book = Ledger(tmp_path / "l.sqlite")
    record(book, "usage", "s", "http://x/metrics", [(f"vllm:m{i}_total", float(i), {}) for i in range(5000)])
    book.close()
    r = run_cli("track", "show", "s", "--ledger", str(tmp_path / "l.sqlite"), "--plot", str(tmp_path / "p.png"),
                "--json")
    assert_bounded(r, ok=True, wall_s=60, rss=800 * 2**20)
    assert "left out" in r.stderr and json.loads(r.stdout)["plot_series_left_out"] > 0
    assert (tmp_path / "p.png").stat().st_size > 0
