"""Every writer fed `<script>`, `[/]` and `\\x1b[2J`: the terminal renderers print them as inert text
(no MarkupError, no escape sequence reaches the terminal), the HTML writers escape them, the
Markdown writer escapes them, and the error line stays one line."""

from __future__ import annotations

import io
import re

import numpy as np
from safetensors.numpy import save_file

from archprobe.cli.errors import describe
from archprobe.cli.textsafe import SafeConsole
from archprobe.errors import ArchprobeError, CheckpointError

PAYLOAD = "[/][bold red]<script>alert(1)</script>\x1b[2J\n|`*_"


def _hostile_inspect_doc(tmp_path):
    import json

    from archprobe.structure.inspect import inspect_checkpoint

    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": PAYLOAD, "architectures": [PAYLOAD],
                                                    "hidden_size": 4, "num_attention_heads": 1}))
    # one attention layer (so memory can plan it: the card reads q/k/v/o from shapes) and one hostile name
    attention = {f"model.layers.0.self_attn.{p}_proj.weight": np.zeros((4, 4), np.float32) for p in "qkvo"}
    save_file({f"model.layers.0.{PAYLOAD}.weight": np.zeros((4, 4), np.float32), **attention,
               "model.embed_tokens.weight": np.zeros((8, 4), np.float32)}, str(folder / "model.safetensors"))
    return inspect_checkpoint(str(folder))


def _inert_terminal_text(text: str) -> None:
    assert "\x1b[2J" not in text and "\x1b[1;31m" not in text   # only our own styles, never the payload's
    assert "[/][bold red]" in text          # shown, not applied (and no MarkupError)
    assert "\\x1b[2J" in text               # the escape made visible


def test_inspect_renderer(tmp_path):
    from archprobe.cli.render.inspect import render_inspect

    out = io.StringIO()
    render_inspect(_hostile_inspect_doc(tmp_path), console=SafeConsole(file=out, width=400, force_terminal=True))
    _inert_terminal_text(out.getvalue())


def test_safe_console_even_on_a_colour_terminal():
    out = io.StringIO()
    c = SafeConsole(file=out, width=200, force_terminal=True, color_system="truecolor")
    from rich.table import Table

    t = Table(PAYLOAD, title=PAYLOAD)
    t.add_row(PAYLOAD)
    c.print(PAYLOAD)
    c.print(t)
    text = out.getvalue()
    assert "[/][bold red]" in text and "\x1b[2J" not in text and "\\x1b[2J" in text


def test_memory_adapt_validate_and_eval_renderers(capsys):
    from archprobe.cli.render.adapt import render_adapt
    from archprobe.cli.render.eval import render_report
    from archprobe.cli.render.memory import render_memory
    from archprobe.cli.render.validate import render_validate
    from archprobe.demo import demo_checkpoint
    from archprobe.memory.sizing import sizing_document
    from archprobe.structure.inspect import inspect_checkpoint

    plan = sizing_document(inspect_checkpoint(str(demo_checkpoint())), 1024, gpu="h200", devices=2)
    plan.update({"weight_dtype": PAYLOAD, "kv_dtype": PAYLOAD, "cache_by_layer_type": {PAYLOAD: 1},
                 "assumptions": [PAYLOAD], "largest_fitting_context_why": PAYLOAD})
    plan["device"] = {**plan["device"], "label": PAYLOAD}
    render_memory([plan], PAYLOAD)
    render_adapt({"model_type": PAYLOAD, "architectures": [PAYLOAD], "features": [PAYLOAD], "note": PAYLOAD,
                  "frameworks": [{"framework": PAYLOAD, "version": PAYLOAD, "status": PAYLOAD, "known_as": PAYLOAD,
                                  "missing": [PAYLOAD], "installed": True, "notes": [PAYLOAD],
                                  "features": [{"feature": PAYLOAD, "status": PAYLOAD, "why": PAYLOAD}]}],
                  "matrix": {PAYLOAD: {PAYLOAD: PAYLOAD}}})
    render_validate({"status": PAYLOAD, "mapped_tensors": 1, "unmapped_tensors": [], "peak_rss_bytes": 1,
             "reasons": [PAYLOAD], "missing_tensors": [PAYLOAD], "reference": {"error": PAYLOAD},
             "layers": [{"index": 0, "kind": PAYLOAD, "out_rms": 1.0, "max_abs": 1.0, "finite": True,
                         "seconds": 0.1}]})
    render_report(_eval_doc())
    _inert_terminal_text(capsys.readouterr().out)


def _eval_doc() -> dict:
    check = {"status": "met", "evidence": PAYLOAD}
    return {"run_id": PAYLOAD, "verdict": PAYLOAD, "model": PAYLOAD, "endpoint": PAYLOAD, "task_set_hash": PAYLOAD,
            "attempts_per_task": 1, "operator": PAYLOAD, "host": PAYLOAD, "success_rate": 0.5, "ci95": [0.1, 0.9],
            "ci_method": PAYLOAD, "attempts_total": 1, "retries": 0, "interventions": None, "unsettled_slots": 0,
            "outcomes": {PAYLOAD: 1}, "checks": {PAYLOAD: check}, "pass_at_k": None,
            "per_task": [{"task_id": PAYLOAD, "attempts": 1, "scored": 1, "passes": 1, "success_rate": 1.0}],
            "attempts": [{"attempt_id": PAYLOAD, "task_id": PAYLOAD, "outcome": PAYLOAD, "seconds": 1.0,
                          "tokens_in": PAYLOAD, "tokens_out": 1, "retry_of": PAYLOAD, "assisted": True,
                          "reason": PAYLOAD}]}


def _inert_html(page: str) -> None:
    assert "<script>" not in page and "\x1b" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "class=" not in page.replace("class='", "").replace("class=num", "").replace("class=muted", "") \
        .replace("class=verdict", "").replace("class=chip", "")   # every class value quoted


def test_eval_html():
    from archprobe.eval.html import render_html

    _inert_html(render_html(_eval_doc()))


def test_report_html_and_markdown_with_a_hostile_validate_document(tmp_path):
    from archprobe.memory.plan import plan_memory
    from archprobe.report.html import render as html
    from archprobe.report.markdown import render as markdown

    doc = _hostile_inspect_doc(tmp_path)
    plan = plan_memory(doc, 1024)
    hostile_validate = {"schema": "archprobe.validate/1", "status": PAYLOAD, "mapped_tensors": PAYLOAD,
                        "unmapped_tensors": 7, "reference": PAYLOAD,
                        "layers": [{"index": "<img src=x onerror=alert(1)>", "kind": PAYLOAD, "out_rms": PAYLOAD,
                                    "max_abs": None, "finite": PAYLOAD}, "not a row"]}
    data = {"inspect": doc, "memory": plan, "sweep": [plan], "budget_bytes": None, "adapt": {"error": PAYLOAD},
            "validate": hostile_validate}
    page = html(data)
    _inert_html(page)
    assert "<img" not in page
    text = markdown(data)
    assert "<script>" not in text and "<img" not in text and "\x1b" not in text
    assert "\\[/\\]" in text and "\\|" in text   # Markdown metacharacters escaped, table cells intact
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert rows and all(len(re.findall(r"(?<!\\)\|", line)) in (3, 4, 5, 6) for line in rows)


def test_error_lines_stay_one_line():
    for exc in (ArchprobeError(PAYLOAD, hint=PAYLOAD), CheckpointError(PAYLOAD, PAYLOAD), ValueError(PAYLOAD),
                OSError(2, PAYLOAD, PAYLOAD), ModuleNotFoundError("No module named 'torch'", name="torch")):
        line, code = describe(exc)
        assert code == 2 and "\n" not in line and "\x1b" not in line
    assert "archprobe[torch]" in describe(ModuleNotFoundError("x", name="torch"))[0]
    assert describe(ValueError("x"))[0].startswith("internal error: ValueError: x (ARCHPROBE_DEBUG=1")
