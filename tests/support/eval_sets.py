"""What the eval tests share: the agentic task set and its fixes, the scripted tool-calling agent, the
relayed-claim example, how a server's log maps to outcomes, and a hand edit of a ledger."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from tests.support.scripted import completion

EXAMPLE = Path(__file__).parents[2] / "examples" / "relayed-claim.yaml"


ACTION_TO_OUTCOME = {"correct": "pass", "wrong": "fail", "error": "error", "rate_limit": "error", "stall": "timeout"}


def server_actions(server) -> dict[str, str]:
    """attempt key (task/sample/try) -> what the server did; each key must appear once."""
    out: dict[str, str] = {}
    for entry in server.log:
        assert entry["attempt"] not in out, f"server saw attempt {entry['attempt']} twice"
        out[entry["attempt"]] = entry["action"]
    return out


FIX = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a * b\n"


def agentic_set(root: Path) -> None:
    repo = root / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "test_calc.py").write_text("from calc import add\nassert add(2, 3) == 5\nprint('visible ok')\n")
    (root / "hidden").mkdir()
    (root / "hidden" / "test_hidden.py").write_text("from calc import add\nassert add(10, -4) == 6\nprint('ok')\n")
    task = {"id": "fix", "prompt": "Fix add() in calc.py.", "scorer": "command", "repo": "repo",
            "hidden_tests": "hidden", "test_command": "python3 test_calc.py && python3 test_hidden.py",
            "visible_test_command": "python3 test_calc.py"}
    (root / "tasks.jsonl").write_text(json.dumps(task) + "\n")


def script(sample: int) -> list[list[dict]]:
    """The tool calls of each turn; an empty list ends with a plain reply."""
    fix = FIX if sample % 2 == 0 else WRONG
    turns = [[{"name": "list_files", "args": {}}, {"name": "read_file", "args": {"path": "calc.py"}}],
             [{"name": "run", "args": {"command": "python3 test_calc.py; echo status=$?"}}],
             [{"name": "write_file", "args": {"path": "calc.py", "content": fix}},
              {"name": "read_file", "args": {"path": "../../etc/passwd"}}],
             [{"name": "run_tests", "args": {}}],
             [{"name": "finish", "args": {"summary": "done"}}]]
    return turns[: 3 + sample % 3] + [turns[-1]] if sample % 3 else turns


class Agent:
    """Plays the script, logs what it sent (tokens included), pauses where a test wants to intervene."""

    def __init__(self, pause_at: str | None = None):
        self.sent: dict[str, list[dict]] = {}
        self.times: dict[str, list[float]] = {}
        self.pause_at, self.paused, self.resume = pause_at, threading.Event(), threading.Event()
        self.seen_messages: dict[str, list] = {}

    def __call__(self, key, body, entry):
        base, _, turn = key.partition("#")
        turn = int(turn or 0)
        sample = int(base.split("/")[1])
        plan = script(sample)
        self.times.setdefault(base, []).append(time.time())
        self.seen_messages[key] = body["messages"]
        if key == self.pause_at:
            self.paused.set()
            self.resume.wait(30)
        calls = plan[turn] if turn < len(plan) else []
        tokens = (100 + 7 * turn + sample, 20 + turn)
        self.sent.setdefault(base, []).append({"calls": calls, "tokens": tokens})
        time.sleep(0.05)
        if turn == 1 and sample == 1:          # a malformed call: arguments that are not JSON
            payload = json.loads(completion(tool_calls=calls, tokens=tokens))
            payload["choices"][0]["message"]["tool_calls"].append(
                {"id": "bad", "type": "function", "function": {"name": "run", "arguments": "{not json"}})
            self.sent[base][-1]["calls"] = [*calls, {"name": "run", "raw": "{not json"}]
            return 200, json.dumps(payload).encode(), {}
        return 200, completion(tool_calls=calls, tokens=tokens), {}


def by_hand(path, *statements):
    """What a person with sqlite3 does: drop the guard, change rows, put the guard back."""
    db = sqlite3.connect(path)
    triggers = db.execute("SELECT name, sql FROM sqlite_master WHERE type='trigger'").fetchall()
    for name, _ in triggers:
        db.execute(f"DROP TRIGGER {name}")
    for s in statements:
        db.execute(s)
    for _, sql in triggers:
        db.execute(sql)
    db.commit()
    db.close()
