import json
import shutil

import pytest

from archprobe.eval import scorers
from archprobe.eval.tasks import BUILTIN, TaskSetError, load_task_set
from archprobe.eval.workspace import EditError, fresh_copy, safe_write, tree_hash


def test_builtin_task_set_loads_with_one_agentic_task(builtin):
    assert len(builtin.tasks) >= 10
    agentic = [t for t in builtin.tasks if t.agentic]
    assert len(agentic) == 1 and agentic[0].repo_hash.startswith("sha256:")
    assert builtin.hash.startswith("sha256:")


def test_hash_covers_the_starting_repository(tmp_path):
    copy = tmp_path / "set"
    shutil.copytree(BUILTIN, copy)
    before = load_task_set(copy).hash
    assert before == load_task_set(BUILTIN).hash
    (copy / "repos" / "fix_median" / "stats.py").write_text("def median(v):\n    return 0\n")
    assert load_task_set(copy).hash != before


def test_hash_covers_targets(tmp_path):
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "a", "prompt": "1+1?", "target": "2"}) + "\n")
    h1 = load_task_set(tmp_path).hash
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "a", "prompt": "1+1?", "target": "3"}) + "\n")
    assert load_task_set(tmp_path).hash != h1


@pytest.mark.parametrize("line,message", [
    ("not json", "not JSON"),
    ('{"prompt": "x"}', "needs an `id`"),
    ('{"id": "a"}', "needs `messages` or a `prompt`"),
    ('{"id": "a", "prompt": "x", "scorer": "vibes"}', "unknown scorer"),
    ('{"id": "a", "prompt": "x", "scorer": "command"}', "needs a `test_command`"),
    ('{"id": "a", "prompt": "x", "repo": "../../etc", "scorer": "command", "test_command": "true"}',
     "not a folder inside the task set"),
    ('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}', "appears twice"),
])
def test_bad_task_sets_are_clear_errors(tmp_path, line, message):
    (tmp_path / "tasks.jsonl").write_text(line + "\n")
    with pytest.raises(TaskSetError, match=message):
        load_task_set(tmp_path)


def test_missing_task_set(tmp_path):
    with pytest.raises(TaskSetError, match="no tasks.jsonl"):
        load_task_set(tmp_path / "nothing")


def test_scorers():
    assert scorers.score("exact", " 391\n", "391")
    assert not scorers.score("exact", "391.", "391")
    assert scorers.score("contains", "It is Paris.", "Paris")
    assert scorers.score("contains", "a b", ["a", "b"]) and not scorers.score("contains", "a", ["a", "b"])
    assert scorers.score("regex", "date: 2024-03-05", r"\b2024-03-05\b")
    assert scorers.score("json_match", 'Here:\n```json\n{"a": 4, "b": "ok"}\n```', {"a": 4, "b": "ok"})
    assert scorers.score("json_match", 'sure {"b": "ok", "a": 4} done', {"a": 4, "b": "ok"})
    assert not scorers.score("json_match", '{"a": 5}', {"a": 4})
    assert scorers.score("refusal", "I'm sorry, but I can't help with that.", {"expect": "refuse"})
    assert not scorers.score("refusal", "Sure, here is how.", {"expect": "refuse"})
    assert scorers.score("refusal", "Sure, here is how.", {"expect": "comply"})
    assert scorers.score("refusal", "nope", {"expect": "refuse", "patterns": ["^nope$"]})


def test_workspace_copy_is_verified_and_edits_stay_inside(tmp_path, builtin):
    task = next(t for t in builtin.tasks if t.agentic)
    dst = tmp_path / "w"
    assert fresh_copy(builtin.root / task.repo, dst, task.repo_hash) == task.repo_hash
    assert safe_write(dst, "stats.py", "x = 1\n") == "stats.py"
    for bad in ("../escape.py", "/etc/passwd", "a\0b", "x/" * 600, "."):
        with pytest.raises(EditError):
            safe_write(dst, bad, "bad")
    assert not (tmp_path / "escape.py").exists()
    assert tree_hash(dst) != task.repo_hash
