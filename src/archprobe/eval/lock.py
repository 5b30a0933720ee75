"""One writer per run id: a byte-range lock in a file beside the ledger.

Why a lock and not SQLite alone: two `eval run --run-id X` processes would each see the same unsettled
slots and race to start the same attempts. The lock is taken before the run is read or created and
held until the run ends; the kernel drops it when the process dies (even by SIGKILL), so a resume
after a crash never finds a stale lock. Several runs on one ledger lock different bytes of one file.
Where fcntl is missing (Windows) runs are not locked, and the policy says so.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from archprobe.errors import ArchprobeError

_held: set[tuple[str, str]] = set()   # POSIX locks do not exclude the process that holds them


class RunLocked(ArchprobeError):
    """Another process is writing this run."""


class RunLock:
    def __init__(self, ledger_path: Path, run_id: str):
        self.path = Path(str(ledger_path) + "-runlocks")
        self.run_id = run_id
        self.offset = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:4], "big") & 0x7FFFFFFF
        self.fd: int | None = None

    def __enter__(self) -> RunLock:
        me = (str(self.path.resolve()), self.run_id)
        if me in _held:
            raise RunLocked(f"run {self.run_id!r} is already being written by this process")
        try:
            import fcntl
        except ImportError:
            return self
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            from archprobe.eval.ledger import LedgerError

            raise LedgerError(f"{self.path}: cannot create the run lock beside the ledger ({exc.strerror})",
                              hint="use a writable --ledger path") from None
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, self.offset)
        except OSError:
            os.close(self.fd)
            self.fd = None
            raise RunLocked(f"run {self.run_id!r} is being written by another process on this ledger",
                            hint="wait for it to finish (or stop it), then resume with the same --run-id") from None
        _held.add(me)
        return self

    def __exit__(self, *exc) -> None:
        _held.discard((str(self.path.resolve()), self.run_id))
        if self.fd is not None:
            os.close(self.fd)   # closing drops the lock
            self.fd = None
