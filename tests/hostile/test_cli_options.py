"""Every option value a user (or a script) can type: a one-line error (exit 2) or a sane answer, never a
traceback, an OverflowError or a negative peak; outputs checked writable before the work; missing
optional extras named with the extra that installs them."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.cli import ROOT, assert_bounded, run_cli
from tests.support.cli import invoke as invoke_cli

NASTY = ["inf", "-inf", "nan", "1e400", "1e400GB", "-100000", "0", "1e23", "9" * 500, "", " ", "4k", "1M", "32k",
         "1.5", "0x10", "[/]", "\x1b[2J", "1e-400", "80GB", "-1GB", "1e19", "١٢"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    old = os.environ.get("ARCHPROBE_CACHE")
    os.environ["ARCHPROBE_CACHE"] = str(cache)
    from archprobe.demo import demo_checkpoint

    path = str(demo_checkpoint())
    yield path
    if old is None:
        os.environ.pop("ARCHPROBE_CACHE", None)
    else:
        os.environ["ARCHPROBE_CACHE"] = old


def invoke(*args):
    r = invoke_cli(*args)
    assert r.exit_code in (0, 2), (args, r.exit_code, r.output, r.exception)
    assert isinstance(r.exception, SystemExit | None), (args, repr(r.exception))
    assert len(r.stderr.strip().splitlines()) <= 1, (args, r.stderr)
    assert "Traceback" not in r.output and "\x1b" not in r.stderr
    return r


option_values = st.sampled_from(NASTY) | st.text(max_size=12) | st.integers(-10**30, 10**30).map(str) \
    | st.floats(allow_nan=True, allow_infinity=True).map(str)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(["--context", "--budget", "--chunk", "--batch", "--devices", "--weight-dtype",
                               "--kv-dtype", "--engine", "--sweep"]), value=option_values)
def test_memory_options(demo, option, value):
    r = invoke("memory", demo, option, value, "--json")
    if r.exit_code == 0:
        doc = json.loads(r.stdout)
        plans = doc.get("plans", [doc])
        assert all(p["peak_bytes"] >= 0 and p["weights_bytes"] >= 0 for p in plans)
        assert all(v >= 0 for p in plans for v in p["cache_by_layer_type"].values())
    else:
        assert r.stderr.startswith("error: ")


@pytest.mark.parametrize("args", [["--context", "inf"], ["--budget", "1e400GB"], ["--weight-dtype", "evil"],
                                  ["--chunk", "-100000"], ["--batch", "0"], ["--context", "1e23"],
                                  ["--plot", "/no/such/folder/m.png"]])
def test_named_bad_options_are_one_line(demo, args):
    r = invoke("memory", demo, *args)
    assert r.exit_code == 2 and r.stderr.startswith("error: ")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=option_values)
def test_report_options(demo, tmp_path_factory, value):
    out = tmp_path_factory.mktemp("r") / "r.html"
    invoke("report", demo, "--context", value, "--out", str(out))
    invoke("report", demo, "--budget", value, "--out", str(out))


@pytest.mark.parametrize("ids", ["1e23", "99999999999999999999", "-1", "1,,x", "1" * 5000, "[/]", "\x1b[2J"])
def test_validate_prompt_ids_before_any_work(demo, ids):
    r = invoke("validate", demo, "--prompt-ids", ids)
    assert r.exit_code == 2 and r.stderr.startswith("error: --prompt-ids")


def test_outputs_are_checked_before_the_run(demo, tmp_path):
    r = invoke("validate", demo, "--prompt-ids", "1", "--save-logits", str(tmp_path / "missing" / "l.safetensors"))
    assert r.exit_code == 2 and "--save-logits" in r.stderr and "does not exist" in r.stderr
    r = invoke("report", demo, "--out", str(tmp_path / "missing" / "r.html"))
    assert r.exit_code == 2 and "--out" in r.stderr


def test_usage_errors_are_one_line():
    for args in (["memory", "--batch", "many"], ["inspect", "--nope"], ["nosuchcommand"], ["eval", "run"]):
        r = invoke(*args)
        assert r.exit_code == 2 and r.stderr.startswith("error: ")


def _fake_missing(tmp_path, module: str) -> dict:
    fake = tmp_path / "fake" / module
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(f'raise ModuleNotFoundError("No module named {module!r}", name={module!r})\n')
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path / "fake"), os.path.join(ROOT, "src"), ROOT])}


def test_missing_torch_is_one_line_naming_the_extra(demo, tmp_path):
    r = run_cli("validate", demo, "--prompt-ids", "1", env=_fake_missing(tmp_path, "torch"))
    assert_bounded(r, ok=False, contains="archprobe[torch]")


def test_missing_matplotlib_is_one_line_naming_the_extra(demo, tmp_path):
    r = run_cli("memory", demo, "--plot", str(tmp_path / "m.png"), env=_fake_missing(tmp_path, "matplotlib"))
    assert_bounded(r, ok=False, contains="archprobe[plot]")


def test_debug_shows_the_traceback(tmp_path):
    r = run_cli("inspect", str(tmp_path / "missing"))
    assert_bounded(r, ok=False)
    r = run_cli("inspect", str(tmp_path / "missing"), env={"ARCHPROBE_DEBUG": "1"})
    assert r.rc != 0 and "Traceback" in r.stderr


def test_odd_sources_paths_and_urls(demo, tmp_path):
    fifo = str(tmp_path / "f.safetensors")
    os.mkfifo(fifo)
    out = str(tmp_path / "r.html")
    for args in (["inspect", ""], ["inspect", "/dev/zero"], ["inspect", fifo], ["inspect", "a/.."],
                 ["inspect", "a/b@.."], ["inspect", "x" * 5000], ["validate", demo, "--dtype", "evil"],
                 ["memory", demo, "--sweep", ",,,"], ["memory", demo, "--devices", "9" * 30],
                 ["report", demo, "--validate-json", fifo, "--out", out], ["report", demo, "--out", "/"],
                 ["track", "usage", "http://[::1", "--subject", "s", "--ledger", str(tmp_path / "l.sqlite")],
                 ["track", "usage", "file:///etc/passwd", "--subject", "s", "--ledger", str(tmp_path / "l.sqlite")],
                 ["track", "reach", "../..", "--ledger", str(tmp_path / "l.sqlite")],
                 ["eval", "run", "builtin", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--timeout", "nan",
                  "--ledger", str(tmp_path / "e.sqlite")]):
        r = invoke(*args)
        assert r.exit_code == 2 and r.stderr.startswith("error: "), (args, r.stderr)
