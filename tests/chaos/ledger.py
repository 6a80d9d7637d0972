"""The witness ledger of the chaos suite: what every process saw, in files a kill cannot corrupt.

Each process appends JSON lines to its own file (`<role>-<pid>.jsonl`) opened with O_APPEND, so a
SIGKILL can at worst cut that process's last line, never another's. A line is one `write(2)`;
acknowledged writes are fsynced, because they are the promises the checker holds the store to.

Kinds of line: `ack` (the producer's write returned), `start` / `end` (an attempt of a function
began / ended, `ok` false when it raised), `effect` (an outside effect happened), `kill` (the
test sent a signal to a process; `pid` is the victim).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of the ledger."""

    kind: str
    key: str
    pid: int
    at: int  # time.time_ns() when the line was written (one clock for every process)
    fields: dict[str, Any]

    def get(self, name: str, default: Any = None) -> Any:
        """A field of the line beyond kind, key, pid and at."""
        return self.fields.get(name, default)


class Ledger:
    """This process's append-only file in a ledger folder."""

    def __init__(self, folder: str | Path, role: str) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.pid = os.getpid()
        path = self.folder / f"{role}-{self.pid}.jsonl"
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, kind: str, key: str, *, sync: bool = False, **fields: Any) -> None:
        """Append one line (and fsync it when `sync`)."""
        line = {"kind": kind, "key": key, "pid": self.pid, "at": time.time_ns(), **fields}
        os.write(self.fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())
        if sync:
            os.fsync(self.fd)

    def acks(self, keys: list[str], **fields: Any) -> None:
        """Record acknowledged writes, all in one fsynced append."""
        now = time.time_ns()
        lines = "".join(
            json.dumps({"kind": "ack", "key": k, "pid": self.pid, "at": now, **fields}) + "\n"
            for k in keys
        )
        os.write(self.fd, lines.encode())
        os.fsync(self.fd)

    def close(self) -> None:
        """Close the file."""
        os.close(self.fd)


_ledgers: dict[tuple[str, int], Ledger] = {}


def for_process(folder: str | Path, role: str) -> Ledger:
    """The ledger of this process (a new one after a fork: the pid is part of the key)."""
    key = (f"{folder}/{role}", os.getpid())
    if key not in _ledgers:
        _ledgers[key] = Ledger(folder, role)
    return _ledgers[key]


def read(folder: str | Path) -> list[Entry]:
    """Every complete line of every file in the folder, in time order (a cut line is skipped)."""
    entries = []
    for path in sorted(Path(folder).glob("*.jsonl")):
        for raw in path.read_bytes().split(b"\n"):
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # empty, or the last line of a killed process, cut mid-write
            kind, key, pid, at = (line.pop(k) for k in ("kind", "key", "pid", "at"))
            entries.append(Entry(kind, key, pid, at, line))
    entries.sort(key=lambda e: e.at)
    return entries
