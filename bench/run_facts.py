"""Facts about a run of bench/run_all: the machine, its load and speed, the commit measured,
the servers' versions and settings, oncefire's defaults."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from typing import Any

from benchlib import PG_ADMIN_URL, ROOT, SRC, cpu_probe, machine, wake_probe


def git(*args: str) -> str:
    """A git command's output in this checkout, or nothing."""
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def postgres_facts() -> dict[str, Any]:
    """The PostgreSQL server's version and durability settings, or why they are unknown."""
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=5) as conn:
            facts = {}
            for name in ("server_version", "synchronous_commit", "fsync", "wal_sync_method"):
                row = conn.execute(f"SHOW {name}").fetchone()
                facts[name] = row[0] if row else "?"
            return facts
    except Exception as exc:
        return {"error": str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)}


def redis_command(sock: socket.socket, *words: str) -> list[str]:
    """One command over RESP; its reply as a list of strings (an array, or one value)."""
    sock.sendall(f"*{len(words)}\r\n".encode())
    for word in words:
        sock.sendall(f"${len(word.encode())}\r\n{word}\r\n".encode())
    reader = sock.makefile("rb")

    def value() -> list[str]:
        line = reader.readline().decode().rstrip("\r\n")
        kind, rest = line[:1], line[1:]
        if kind == "$":
            size = int(rest)
            return [] if size < 0 else [reader.read(size + 2)[:-2].decode(errors="replace")]
        if kind == "*":
            return [item for _ in range(max(0, int(rest))) for item in value()]
        if kind == "-":
            raise OSError(rest)
        return [rest]

    return value()


def redis_facts() -> dict[str, str]:
    """Redis's version and persistence settings (save, appendonly, appendfsync)."""
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=3) as sock:
            info = "\n".join(redis_command(sock, "INFO", "server"))
            facts = {"version": "?"}
            for line in info.splitlines():
                if line.startswith("redis_version:"):
                    facts["version"] = line.split(":", 1)[1].strip()
            for name in ("save", "appendonly", "appendfsync"):
                reply = redis_command(sock, "CONFIG", "GET", name)
                facts[name] = reply[1] if len(reply) > 1 else "?"
            return facts
    except OSError as exc:
        return {"error": f"unreachable ({exc})"}


def settings_defaults() -> dict[str, Any]:
    """oncefire's settings and their defaults, from the oncefire measured."""
    try:
        from dataclasses import asdict

        from oncefire.settings import Settings

        return asdict(Settings())
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def run_facts(run_id: str, mode: str, runs: int, sizes: dict[str, float]) -> dict[str, Any]:
    """The facts of a run, read at its start (the smoke run skips the speed probes)."""
    probed = mode != "quick"
    dirty = git("status", "--porcelain", "--", "src")
    load = os.getloadavg()
    return {
        "run_id": run_id,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": machine(),
        "load_average_at_start": [round(x, 2) for x in load],
        "cpu_probe_us_at_start": cpu_probe() if probed else None,
        "wake_probe_us_at_start": wake_probe() if probed else None,
        "python": sys.version.split()[0],
        "oncefire_commit": git("rev-parse", "--short", "HEAD"),
        "oncefire_src_dirty": bool(dirty) and (ROOT / "src").resolve() == SRC,
        "oncefire_src": str(SRC.relative_to(ROOT) if SRC.is_relative_to(ROOT) else SRC),
        "sqlite": sqlite3.sqlite_version,
        "postgres": postgres_facts(),
        "redis": redis_facts(),
        "settings": settings_defaults(),
        "mode": mode,
        "runs": runs,
        "sizes": sizes,
    }
