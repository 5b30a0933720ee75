"""Task sets: a folder with `tasks.jsonl` and, for agentic tasks, starting repositories.

Why a content hash over everything (T1): two runs are comparable only if they ran the same
instructions, the same targets and the same starting files; the hash says so without trust.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from archprobe.errors import ArchprobeError
from archprobe.eval.scorers import SCORERS
from archprobe.eval.workspace import check_starting_repo, tree_hash
from archprobe.formats.limits import MAX_TASK_TIMEOUT_S, MAX_TASKS_BYTES

BUILTIN = Path(__file__).parent / "builtin"
# the built-in sets: a quick chat smoke set, agentic repository tasks with hidden tests, a refusal set
BUILTIN_SETS = {"builtin": BUILTIN, "builtin-agentic": BUILTIN / "agentic", "builtin-refusal": BUILTIN / "refusal"}


class TaskSetError(ArchprobeError):
    """A task set is missing, malformed or refers to files outside itself."""


@dataclass(frozen=True)
class Task:
    """One task. `repo` and `test_command` make it agentic: an agent edits a fresh copy of `repo`,
    then `test_command`'s exit status decides pass (0) or fail."""

    id: str
    messages: tuple[dict, ...]
    scorer: str
    target: object = None
    reference: str | None = None      # a known-good answer, used by the stand-in server only
    repo: str | None = None
    test_command: str | None = None
    agent_command: str | None = None
    timeout_s: float | None = None
    repo_hash: str | None = None
    hidden_tests: str | None = None           # folder copied over the workspace just before the final test
    hidden_hash: str | None = None
    visible_test_command: str | None = None   # what the agent's run_tests tool runs (default: test_command)
    protected: tuple[str, ...] = ()           # more files restored from the starting repo before the tests
    difficulty: str | None = None

    @property
    def agentic(self) -> bool:
        return self.repo is not None

    @property
    def prompt(self) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.messages if m.get("role") == "user")


@dataclass
class TaskSet:
    root: Path
    tasks: list[Task]
    hash: str
    name: str = ""
    by_id: dict[str, Task] = field(default_factory=dict)

    def __post_init__(self):
        self.by_id = {t.id: t for t in self.tasks}


def load_task_set(spec: str | Path) -> TaskSet:
    """`builtin`, `builtin-agentic`, `builtin-refusal`, or a folder holding tasks.jsonl (or that file)."""
    root = BUILTIN_SETS.get(str(spec)) or Path(spec)
    if root.is_file():
        root = root.parent
    from archprobe.formats import jsontext, structured

    jsonl = root / "tasks.jsonl"
    if not jsonl.exists():
        raise TaskSetError(f"{root}: no tasks.jsonl here", hint="a task set is a folder with tasks.jsonl; "
                           "or use `builtin`")
    # capped before it is read (a FIFO refused); the parse cost of all lines together bounded at once
    raw = structured.read_bytes(str(jsonl), MAX_TASKS_BYTES, "the task file", TaskSetError)
    jsontext.check_cost(raw, str(jsonl), "the task file", TaskSetError)
    tasks = [_parse_task(root, jsonl, n, line) for n, line in enumerate(raw.splitlines(), 1) if line.strip()]
    if not tasks:
        raise TaskSetError(f"{jsonl}: no tasks")
    seen: set[str] = set()
    for t in tasks:
        if t.id in seen:
            raise TaskSetError(f"{jsonl}: task id {t.id!r} appears twice")
        seen.add(t.id)
    return TaskSet(root=root, tasks=tasks, hash=task_set_hash(raw, tasks), name=root.name)


def task_set_hash(tasks_jsonl: bytes, tasks: list[Task]) -> str:
    """sha256 over tasks.jsonl and each starting repository's tree hash, in task order."""
    h = hashlib.sha256(b"archprobe.taskset/1\0")
    h.update(tasks_jsonl)
    for t in tasks:
        if t.repo_hash:
            h.update(f"\0{t.id}\0{t.repo_hash}".encode())
        if t.hidden_hash:
            h.update(f"\0{t.id}\0hidden\0{t.hidden_hash}".encode())
    return "sha256:" + h.hexdigest()


def _parse_task(root: Path, jsonl: Path, lineno: int, line: bytes) -> Task:
    from archprobe.formats import structured

    where = f"{jsonl}:{lineno}"
    try:
        obj = structured.parse_json(line, where, "the line", TaskSetError, want=None)
    except TaskSetError as exc:
        raise TaskSetError(exc.message.replace("the line is not valid JSON", "not JSON")) from None
    if not isinstance(obj, dict):
        raise TaskSetError(f"{where}: a task is a JSON object")
    task_id = obj.get("id")
    if not isinstance(task_id, str | int) or str(task_id) == "":
        raise TaskSetError(f"{where}: every task needs an `id`")
    messages = obj.get("messages")
    if messages is None:
        prompt = obj.get("prompt")
        if not isinstance(prompt, str):
            raise TaskSetError(f"{where}: task {task_id!r} needs `messages` or a `prompt` string")
        messages = [{"role": "user", "content": prompt}]
    if not (isinstance(messages, list) and all(isinstance(m, dict) and "role" in m for m in messages)):
        raise TaskSetError(f"{where}: `messages` must be a list of {{role, content}} objects")
    scorer = obj.get("scorer", "exact")
    if scorer not in SCORERS:
        raise TaskSetError(f"{where}: unknown scorer {scorer!r}", hint="one of " + ", ".join(sorted(SCORERS)))
    repo, repo_hash = obj.get("repo"), None
    if scorer == "command" and not obj.get("test_command"):
        raise TaskSetError(f"{where}: the command scorer needs a `test_command`")
    if repo is not None:
        repo_hash = _folder_hash(root, repo, where, "starting repository")
    hidden = obj.get("hidden_tests")
    hidden_hash = _folder_hash(root, hidden, where, "hidden tests folder") if hidden is not None else None
    if (hidden is not None or repo is not None) and not obj.get("test_command"):
        raise TaskSetError(f"{where}: an agentic task needs a `test_command`")
    protected = obj.get("protected") or []
    if not (isinstance(protected, list) and all(isinstance(p, str) for p in protected)):
        raise TaskSetError(f"{where}: `protected` must be a list of paths")
    if scorer == "regex":
        import regex as engine  # the engine the scorer runs it with (scorers.py)

        try:
            engine.compile(str(obj.get("target")))
        except engine.error as exc:
            raise TaskSetError(f"{where}: the regex target does not compile ({exc})") from None
    timeout = obj.get("timeout_s")
    if timeout is not None and not (isinstance(timeout, int | float) and not isinstance(timeout, bool)
                                    and 0 < timeout <= MAX_TASK_TIMEOUT_S):
        raise TaskSetError(f"{where}: `timeout_s` must be a positive number of seconds, at most "
                           f"{MAX_TASK_TIMEOUT_S:,}")
    return Task(id=str(task_id), messages=tuple(messages), scorer=scorer, target=obj.get("target"),
                reference=obj.get("reference"), repo=repo, test_command=obj.get("test_command"),
                agent_command=obj.get("agent_command"), timeout_s=timeout, repo_hash=repo_hash,
                hidden_tests=hidden, hidden_hash=hidden_hash, visible_test_command=obj.get("visible_test_command"),
                protected=tuple(protected), difficulty=obj.get("difficulty"))


def _folder_hash(root: Path, rel, where: str, what: str) -> str:
    """A folder of the task set, refused if it leaves the set or holds links out, FIFOs or devices."""
    path = (root / str(rel)).resolve()
    if not path.is_relative_to(root.resolve()) or not path.is_dir():
        raise TaskSetError(f"{where}: {what} {rel!r} is not a folder inside the task set")
    try:
        check_starting_repo(root / str(rel))
    except ArchprobeError as exc:
        raise TaskSetError(f"{where}: {exc.message}", hint=exc.hint) from None
    return tree_hash(path)
