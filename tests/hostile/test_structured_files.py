"""Hostile structured files through the real CLI (child process): claim and price YAML alias bombs,
tags, duplicate keys, long integers, NaN; task files that are sparse, FIFOs or JSON bombs; exports
nested too deep; an Inspect log whose member inflates 1000:1. Each is refused in one line, within
the memory and time bounds, before anything is written (formats/structured.py)."""

from __future__ import annotations

import os
import zipfile

import pytest

from tests.support.cli import assert_bounded, run_cli

BOMB = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x, x]"]
                 + [f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]"
                    for p, c in zip("abcdefgh", "bcdefghi", strict=True)]) + "\n"

HOSTILE_YAML = {
    "alias bomb": (BOMB, "expands to over"),
    "python tag": ("x: !!python/object/apply:os.system ['echo hi']\n", "not valid YAML"),
    "duplicate key": ("input: 1/M\ninput: 2/M\noutput: 3/M\n", "appears twice"),
    "5000 digits": ("input: " + "9" * 5000 + "\noutput: 1\n", "digits"),
    "timestamp": ("input: 2001-12-14\noutput: 1\n", "date"),
    "binary": ("input: !!binary aGVsbG8=\noutput: 1\n", "bytes"),
    "nan": ("input: .nan\noutput: 1\n", "not a finite number"),
    "deep": ("x: " + "[" * 5000 + "]" * 5000 + "\n", None),
    "self reference": ("&a [*a]\n", None),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_YAML))
def test_a_hostile_claim_file_is_one_line(tmp_path, case):
    text, expect = HOSTILE_YAML[case]
    (tmp_path / "claim.yaml").write_text(text)
    r = run_cli("eval", "audit", str(tmp_path / "claim.yaml"), "--json", cwd=str(tmp_path))
    assert_bounded(r, ok=False, contains=expect, rss=300 * 2**20, wall_s=15)
    assert sorted(os.listdir(tmp_path)) == ["claim.yaml"]


@pytest.mark.parametrize("case", sorted(HOSTILE_YAML))
def test_a_hostile_price_file_is_refused_before_anything_runs(tmp_path, case):
    text, expect = HOSTILE_YAML[case]
    (tmp_path / "price.yaml").write_text(text)
    r = run_cli("eval", "run", "builtin", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--price",
                str(tmp_path / "price.yaml"), cwd=str(tmp_path))
    assert_bounded(r, ok=False, contains=expect, rss=300 * 2**20, wall_s=15)
    assert sorted(os.listdir(tmp_path)) == ["price.yaml"], "no ledger made for a run that never started"


def test_a_claim_with_yaml_merge_keys_still_loads(tmp_path):
    (tmp_path / "claim.yaml").write_text("base: &b {attempts_per_task: 5}\nresult:\n  <<: *b\n  attempts_per_task: 3\n")
    assert_bounded(run_cli("eval", "audit", str(tmp_path / "claim.yaml"), "--json"), ok=True)


def test_a_fifo_claim_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "claim.yaml")
    r = run_cli("eval", "audit", str(tmp_path / "claim.yaml"))
    assert_bounded(r, ok=False, contains="FIFO", wall_s=15)


def task_folder(tmp_path, write):
    folder = tmp_path / "set"
    folder.mkdir()
    write(folder / "tasks.jsonl")
    return folder


@pytest.mark.parametrize("write, expect", [
    (lambda p: open(p, "wb").truncate(1 << 30), "cap"),                       # 1 GB sparse: never read
    (lambda p: os.mkfifo(p), "FIFO"),
    (lambda p: p.write_bytes(b"[" * (20 * 2**20)), "memory"),                  # 20 MB of one token each
    (lambda p: p.write_bytes(b'{"id": 1, "prompt": "x", "id": 2}\n'), "twice"),
    (lambda p: p.write_bytes(b'{"id": ' + b"9" * 5000 + b', "prompt": "x"}\n'), "digits"),
    (lambda p: p.write_bytes(b'{"id": 1, "prompt": "x", "timeout_s": 1e308}\n'), "timeout_s"),
    (lambda p: p.write_bytes(b'{"id": 1, "prompt": "x", "timeout_s": NaN}\n'), "NaN"),
])
def test_a_hostile_task_file_is_refused_cheaply(tmp_path, write, expect):
    folder = task_folder(tmp_path, write)
    r = run_cli("eval", "run", str(folder), "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
                cwd=str(tmp_path))
    assert_bounded(r, ok=False, contains=expect, rss=300 * 2**20, wall_s=15)
    assert sorted(os.listdir(tmp_path)) == ["set"]


@pytest.mark.parametrize("raw, expect", [
    (b'{"schema": "archprobe.eval-chain/1", "rows": ' + b"[" * 100000 + b"]" * 100000 + b"}", "deep"),
    (b'{"schema": "archprobe.eval-chain/1", "rows": [' + b"[]," * (3 * 2**20) + b"[]]}", "memory"),
    (b'{"schema": "archprobe.eval-chain/1", "schema": "x", "rows": []}', "twice"),
    (b'{"schema": "archprobe.eval-chain/1", "run_id": "r", "rows": [], "head": {"seq": ' + b"9" * 5000 + b"}}",
     "digits"),
])
def test_a_hostile_export_is_refused_cheaply(tmp_path, raw, expect):
    (tmp_path / "e.json").write_bytes(raw)
    r = run_cli("eval", "verify", str(tmp_path / "e.json"))
    assert_bounded(r, ok=False, contains=expect, rss=300 * 2**20, wall_s=15)


def test_an_inspect_log_whose_member_inflates_1000_to_1_is_stopped(tmp_path):
    path = tmp_path / "bomb.eval"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("samples/1.json", "w") as f:
        block = b" " * (1 << 20)
        for _ in range(300):   # 300 MB of spaces, ~300 KB on disk
            f.write(block)
    assert path.stat().st_size < 2 * 2**20
    r = run_cli("eval", "import-inspect", str(path), "--ledger", str(tmp_path / "l.sqlite"))
    assert_bounded(r, ok=False, contains="cap", rss=300 * 2**20, wall_s=20)
    assert not (tmp_path / "l.sqlite").exists()
