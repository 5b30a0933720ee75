"""The test tree's one rule for sharing: what several test modules use lives in tests/support/, no test
module imports another test module (conftest files included), and a support import is a plain import, so a
broken helper fails the run instead of skipping the tests that need it. Two steps every test needs the same
way are made in tests/support only: running the CLI in process (tests.support.cli.invoke) and writing a
transformers checkpoint (tests.support.tiny_models.build / save)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def reaches(path: Path) -> list[str]:
    """Each import in `path` of a test module outside tests/support/, and each importorskip of a tests.* one."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [node.module] if node.module != "tests" else [f"tests.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "importorskip"
              and node.args and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("tests")):
            bad.append(f"line {node.lineno}: importorskip({node.args[0].value!r}) (import it: a failure, not a skip)")
        for target in targets:
            if target.startswith("tests.") and not target.startswith("tests.support"):
                bad.append(f"line {node.lineno}: imports {target} (move what it shares to tests/support/)")
    return sorted(bad)


def test_no_test_module_imports_another_and_support_is_never_skipped():
    bad = [f"{p.relative_to(TESTS.parent)} {why}" for p in sorted(TESTS.rglob("*.py")) for why in reaches(p)]
    assert not bad, "\n".join(bad)


def test_the_rule_sees_each_kind_of_reach(tmp_path):
    sample = tmp_path / "t.py"
    sample.write_text("import tests.cli.test_cli\nfrom tests.eval import conftest\nfrom tests.hostile._x import y\n"
                      "import pytest\nz = pytest.importorskip('tests.support.zoo')\nfrom tests.support.cli import run\n"
                      "from tests import support\n")
    assert [why.split(":")[0] for why in reaches(sample)] == ["line 1", "line 2", "line 3", "line 5"]


# calls made only inside tests/support/, and the helper that makes them for everyone else
SUPPORT_ONLY = {"CliRunner": "tests.support.cli.invoke",
                "save_pretrained": "tests.support.tiny_models.build or save"}


def support_only_calls(path: Path) -> list[str]:
    """Each call in `path` of a name in SUPPORT_ONLY (as a plain name or an attribute)."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in SUPPORT_ONLY:
                bad.append(f"line {node.lineno}: calls {name}( (use {SUPPORT_ONLY[name]})")
    return sorted(bad)


def test_the_cli_runner_and_checkpoint_writing_live_in_support():
    bad = [f"{p.relative_to(TESTS.parent)} {why}" for p in sorted(TESTS.rglob("*.py"))
           if p.relative_to(TESTS).parts[0] != "support" for why in support_only_calls(p)]
    assert not bad, "\n".join(bad)


def test_the_support_only_rule_sees_each_kind_of_call(tmp_path):
    sample = tmp_path / "t.py"
    sample.write_text("from typer.testing import CliRunner\nimport typer.testing\nr = CliRunner()\n"
                      "r2 = typer.testing.CliRunner()\nmodel.save_pretrained(folder)\n"
                      "s = 'model.save_pretrained(x)'\nsave_pretrained = None\nbuild('llama', folder)\n")
    assert [why.split(":")[0] for why in support_only_calls(sample)] == ["line 3", "line 4", "line 5"]
