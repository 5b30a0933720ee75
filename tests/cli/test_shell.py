"""The CLI shell's rules, checked on the real typer app: every command has --json and ends in the one
output function (cli/output.py emit); an option two commands share is declared once (cli/params.py);
no command module writes JSON or stdout by itself."""

from __future__ import annotations

import ast
import inspect
import json
import typing
from pathlib import Path

import typer
from typer.models import OptionInfo

import archprobe.cli as cli_pkg
from archprobe.cli import params
from archprobe.cli.main import app
from archprobe.cli.output import emit
from tests.support.cli import invoke

# the same flag name on purpose, with another meaning: report --releases is a switch ("also read
# releases"), adapt --releases N a count; merging them would change what either accepts
SAME_NAME_OTHER_OPTION = {("report", "--releases")}


def _commands(t: typer.Typer, prefix: str = "") -> list[tuple[str, object]]:
    """(full command name, callback) for every command and sub-command of `t`."""
    out = []
    for c in t.registered_commands:
        out.append(((prefix + " " + (c.name or c.callback.__name__)).strip(), c.callback))
    for g in t.registered_groups:
        out += _commands(g.typer_instance, (prefix + " " + g.name).strip())
    return out


def _options(callback) -> dict[str, OptionInfo]:
    """flag (e.g. --json) -> the OptionInfo that declares it, for each option of a command."""
    hints = typing.get_type_hints(callback, include_extras=True)
    out = {}
    for name in inspect.signature(callback).parameters:
        infos = [m for m in getattr(hints.get(name), "__metadata__", ()) if isinstance(m, OptionInfo)]
        if not infos:
            continue
        info = infos[0]
        # under Annotated, typer reads Option's first positional (`default`) as the first flag name
        first = (info.default,) if isinstance(info.default, str) and info.default.startswith("-") else ()
        decls = [d for decl in (*first, *(info.param_decls or ())) for d in decl.split("/") if d.startswith("--")]
        for flag in decls or ["--" + name.replace("_", "-")]:
            out[flag] = info
    return out


COMMANDS = _commands(app)


def test_the_walk_finds_every_command():
    names = {n for n, _ in COMMANDS}
    assert {"inspect", "demo", "card", "memory", "validate", "adapt", "report", "observe", "diff", "eval run",
            "eval export", "eval standin", "track show"} <= names
    assert len(names) == len(COMMANDS) >= 23


def test_every_command_has_json():
    missing = [n for n, cb in COMMANDS if "--json" not in _options(cb)]
    assert not missing, f"commands without --json: {missing}"


def test_a_shared_option_is_declared_once_in_params():
    declared_in_params = {id(m) for v in vars(params).values() for m in getattr(v, "__metadata__", ())
                          if isinstance(m, OptionInfo)}
    users: dict[str, dict[int, list[str]]] = {}
    for name, cb in COMMANDS:
        for flag, info in _options(cb).items():
            if (name, flag) not in SAME_NAME_OTHER_OPTION:
                users.setdefault(flag, {}).setdefault(id(info), []).append(name)
    for flag, by_decl in users.items():
        commands = [c for cs in by_decl.values() for c in cs]
        if len(commands) < 2:
            continue
        assert len(by_decl) == 1, f"{flag} declared {len(by_decl)} times: {sorted(by_decl.values())}"
        assert next(iter(by_decl)) in declared_in_params, f"{flag} ({commands}) is shared but not in cli/params.py"


def test_every_command_ends_in_emit():
    for name, cb in COMMANDS:
        tree = ast.parse(inspect.getsource(cb).lstrip())
        calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "emit" in calls, f"{name} does not answer through cli/output.py emit"


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def test_no_command_module_writes_json_or_stdout_itself():
    offences = []
    for path in sorted(Path(cli_pkg.__file__).parent.glob("*_cmd.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "json" for a in node.names):
                offences.append(f"{path.name}:{node.lineno} import json")
            elif isinstance(node, (ast.Attribute, ast.Name)):
                name = _dotted(node)
                if name in ("json.dumps", "json.dump", "print_json", "print") or name.startswith("sys.stdout") \
                        or name.endswith(".print_json"):
                    offences.append(f"{path.name}:{node.lineno} {name}")
    assert not offences, offences


def test_emit_prints_the_document_or_renders_it(capsys):
    from archprobe.formats.jsontext import dumps

    doc = {"b": 1, "a": [1.5, "x\u2028"], "nan": float("nan")}
    seen = []
    emit(doc, True, seen.append)
    assert capsys.readouterr().out == dumps(doc) + "\n" and not seen
    emit(doc, False, seen.append)
    assert capsys.readouterr().out == "" and seen == [doc]
    emit(doc, False)
    assert capsys.readouterr().out == ""


def test_eval_export_prints_the_chain_or_what_it_wrote(tmp_path):
    from archprobe.eval.ledger import Ledger
    from archprobe.eval.runner import RunOptions, run_eval
    from archprobe.eval.standin import Behaviour, StandinServer
    from archprobe.eval.tasks import load_task_set

    builtin = load_task_set("builtin")
    ledger = tmp_path / "l.sqlite"
    with StandinServer(builtin, Behaviour(seed=1, p_correct=0.5)) as srv:
        run_eval(Ledger(ledger), builtin, RunOptions(endpoint=srv.url, model="m", attempts=1, timeout_s=20,
                                                     max_retries=0), run_id="r1")
    plain = invoke("eval", "export", "r1", "--ledger", str(ledger))
    flagged = invoke("eval", "export", "r1", "--ledger", str(ledger), "--json", "-o", "-")
    assert plain.exit_code == flagged.exit_code == 0 and plain.stdout == flagged.stdout
    chain = json.loads(plain.stdout)
    assert chain == Ledger(ledger).export_run("r1")
    out = tmp_path / "chain.json"
    written = invoke("eval", "export", "r1", "--ledger", str(ledger), "--output", str(out), "--json")
    doc = json.loads(written.stdout)
    assert doc["written"] == str(out) and doc["rows"] == len(chain["rows"]) > 0 and doc["head"] == chain["head"]
    assert json.loads(out.read_text()) == chain
    line = invoke("eval", "export", "r1", "--ledger", str(ledger), "-o", str(out)).stdout
    assert line.startswith(f"exported {len(chain['rows'])} rows of r1 to {out}")


def test_eval_standin_json_says_where_it_listens(tmp_path):
    import subprocess
    import sys
    import urllib.request

    # port 0: the system picks a free one, and only the JSON says which
    proc = subprocess.Popen([sys.executable, "-m", "archprobe.cli.main", "eval", "standin", "--port", "0", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        text = proc.stdout.readline()
        while text and not text.rstrip().endswith("}"):     # one JSON document, as every --json prints it
            more = proc.stdout.readline()
            text += more
            if not more:
                break
        doc = json.loads(text)
        assert doc["schema"] == "archprobe.standin/1" and doc["model"] is False
        assert doc["url"].startswith("http://127.0.0.1:") and not doc["url"].startswith("http://127.0.0.1:0/")
        with urllib.request.urlopen(doc["url"].rstrip("/") + "/models", timeout=10) as r:
            assert r.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_python_dash_m_archprobe_is_the_cli():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "archprobe", "memory", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "--context" in out.stdout, out.stderr
