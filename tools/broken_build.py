"""Break a copy of the source on purpose and show that the chaos checker or the fault-point
sweep catches each breakage, while the unbroken copy passes the same scenarios.

    python tools/broken_build.py            # every breakage, then the unbroken build
    python tools/broken_build.py NAME ...   # only these (see --list)

Each run copies src/ to a temporary folder, applies the breakage's edits (each must match
exactly: a breakage that no longer applies is an error, not a pass), and runs its scenarios
with PYTHONPATH pointing at the copy; the chaos harness starts its workers on the source the
test imported, so they run the copy too. The exit status is 0 when every breakage is caught by
each of its scenarios and the unbroken build passes them all. PostgreSQL scenarios need
ONCEFIRE_TEST_POSTGRES_URL (and the private cluster of tests/pg_cluster.py for chaos ones).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUARDED = re.compile(r"(-- name: (?:end|renew)_\w+\n(?:(?!-- name:).*\n)*)")
TOKEN_CHECKS = re.compile(r" AND lease_token = (?::token|%\(token\)s)|lease_token = :token AND ")


@dataclass(frozen=True)
class Edit:
    """Replace `old` by `new` in one file of src/ (old must occur)."""

    path: str
    old: str
    new: str


def drop_token_checks(text: str) -> str:
    """The renewing and ending statements (renew_*, end_*) without their lease token check
    (a batch's token match becomes a plain state check)."""

    def drop(match: re.Match[str]) -> str:
        statement = TOKEN_CHECKS.sub("", match.group(1)).replace("d.lease_token = l.token AND ", "")
        return statement.replace("o.lease_token = x.token", "o.state = 'running'")

    return GUARDED.sub(drop, text)


@dataclass(frozen=True)
class Breakage:
    """A named breakage, its edits, and the pytest node selections that must catch it."""

    name: str
    what: str
    edits: tuple[Edit, ...]
    scenarios: tuple[tuple[str, ...], ...]
    rewrites: tuple[str, ...] = ()  # files rewritten by drop_token_checks


CLAIM = "        is_new = tx.claim_key(key, now, now + ttl)\n"
BREAKAGES = (
    Breakage(
        "claim-always-new",
        "tx.claim answers 'new' every time (return True)",
        (Edit("oncefire/documents.py", "        return is_new\n", "        return True\n"),),
        (
            ("tests/faults/test_fault_points.py", "-k", "tx.claim and sqlite"),
            # The full profile's 20 kills: 3 may all miss the window between a function's
            # commit and its record, the only moment a repeat shows (seen in 1 quick run of 2).
            ("tests/chaos/test_kills.py", "--full", "-k", "random and sqlite"),
        ),
    ),
    Breakage(
        "claim-split",
        "tx.claim's key committed in a transaction of its own, apart from the writes it guards "
        "(PostgreSQL: on SQLite the second write transaction would wait for the first)",
        (
            Edit(
                "oncefire/documents.py",
                CLAIM,
                "        with self._db.store.transaction() as own:\n"
                "            is_new = own.claim_key(key, now, now + ttl)\n",
            ),
        ),
        (("tests/faults/test_fault_points.py", "-k", "tx.claim and postgres"),),
    ),
    Breakage(
        "lease-check-removed",
        "the lease token check dropped from the renewing and ending statements of both stores",
        (),
        (("tests/chaos/test_zombies.py", "-k", "while_the_rescuer_runs"),),
        rewrites=(
            "oncefire/stores/sql/sqlite/deliveries.sql",
            "oncefire/stores/sql/postgres/deliveries.sql",
        ),
    ),
    Breakage(
        "fence-removed",
        "a function's transaction no longer checks that its attempt holds the lease",
        (
            Edit(
                "oncefire/documents.py",
                "check_lease = fencing.hold(raw)",
                "check_lease = (lambda: None)  # broken on purpose;",
            ),
        ),
        (
            ("tests/contract/queue/test_fencing.py",),
            ("tests/chaos/test_failover.py", "-k", "asynchronous"),
        ),
    ),
    Breakage(
        "purge-unfinished-events",
        "the retention purge deletes an event whose other delivery is still running",
        (
            Edit(
                "oncefire/stores/sql/sqlite/retention.sql",
                "    AND NOT EXISTS (SELECT 1 FROM oncefire_deliveries d "
                "WHERE d.event_id = oncefire_events.id);",
                ";",
            ),
        ),
        (("tests/faults/test_fault_points.py", "-k", "retention and sqlite"),),
    ),
)


def build(folder: Path, breakage: Breakage | None) -> Path:
    """A copy of src/ with the breakage applied; its path."""
    src = folder / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__"))
    if breakage is None:
        return src
    for edit in breakage.edits:
        path = src / edit.path
        text = path.read_text()
        if edit.old not in text:
            raise SystemExit(f"{breakage.name}: {edit.path} no longer has {edit.old!r}")
        path.write_text(text.replace(edit.old, edit.new))
    for name in breakage.rewrites:
        path = src / name
        text = path.read_text()
        broken = drop_token_checks(text)
        if broken == text:
            raise SystemExit(f"{breakage.name}: no lease token check found in {name}")
        path.write_text(broken)
    return src


def run(src: Path, scenario: tuple[str, ...]) -> tuple[bool, str, float]:
    """Run one scenario on a copy: (passed, the line that tells why, seconds)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    probe = [sys.executable, "-c", "import oncefire; print(oncefire.__file__)"]
    imported = subprocess.run(probe, env=env, capture_output=True, text=True, check=True)
    if not imported.stdout.startswith(str(src)):
        raise SystemExit(f"the copy is not what Python imports: {imported.stdout.strip()}")
    argv = [sys.executable, "-m", "pytest", *scenario, "-q", "-x", "-p", "no:cacheprovider"]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    lines = done.stdout.splitlines()
    if done.returncode == 0:
        return True, lines[-1] if lines else "passed", seconds
    why = [line for line in lines if line.startswith("E ")][:1] or lines[-1:]
    return False, why[0][:200] if why else f"exit {done.returncode}", seconds


def main() -> int:
    """Run the breakages asked for, then the unbroken build; 0 if every one was caught."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="breakages to run (all by default)")
    parser.add_argument("--list", action="store_true", help="list the breakages")
    args = parser.parse_args()
    by_name = {b.name: b for b in BREAKAGES}
    if args.list:
        for b in BREAKAGES:
            print(f"{b.name}: {b.what}")
        return 0
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        parser.error(f"no breakage {', '.join(unknown)} (see --list)")
    chosen = [by_name[n] for n in args.names] if args.names else list(BREAKAGES)
    is_ok = True
    with tempfile.TemporaryDirectory(prefix="oncefire-broken-") as tmp:
        for breakage in [*chosen, None]:
            name = breakage.name if breakage else "unbroken"
            src = build(Path(tmp) / name, breakage)
            scenarios = breakage.scenarios if breakage else [s for b in chosen for s in b.scenarios]
            print(f"{name}: {breakage.what if breakage else 'the source as it is'}", flush=True)
            for scenario in scenarios:
                passed, why, seconds = run(src, scenario)
                expected = breakage is None
                verdict = ("passes" if passed else "FAILS") + (
                    "" if passed == expected else "  <-- not as expected"
                )
                print(f"  {' '.join(scenario)}: {verdict} ({seconds:.0f} s): {why}", flush=True)
                is_ok &= passed == expected
    print("every breakage caught, the unbroken build passes" if is_ok else "NOT AS EXPECTED")
    return 0 if is_ok else 1


if __name__ == "__main__":
    sys.exit(main())
