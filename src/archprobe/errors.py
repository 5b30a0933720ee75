"""Exceptions that mean "the user or the checkpoint is wrong", shown as one line by the CLI.

Anything else escaping to the CLI is a bug in archprobe and keeps its traceback.
"""


class ArchprobeError(Exception):
    """A user-facing error: `message` says what is wrong, `hint` what to try next."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __reduce__(self):
        return (type(self), (self.message, self.hint))


class CheckpointError(ArchprobeError):
    """A checkpoint file is malformed or hostile; the message names the file."""

    def __init__(self, path: str, problem: str, hint: str | None = None):
        super().__init__(f"{path}: {problem}", hint)
        self.path = path
        self.problem = problem

    def __reduce__(self):  # survives the trip back from a worker process
        return (CheckpointError, (self.path, self.problem, self.hint))


class SourceError(ArchprobeError):
    """A source (folder, file, hub repo) cannot be found or read."""
