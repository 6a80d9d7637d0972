"""bench/run_all: every scenario, oncefire and its peers, into RESULTS.md and results.json.

    bench/run_all                 # the full sitting: 3 runs each, with the peers
    bench/run_all --quick         # smoke sizes, 1 run, oncefire only (what CI runs)
    bench/run_all --runs 5 --no-peers --only throughput,latency
    bench/run_all --render        # RESULTS.md again from results.json, nothing measured

The full sitting took 38.6 minutes on the 2-core machine on 2026-12-06 (11:30 UTC), its
growth history and peers in place, before the backlogs grew: oncefire's throughput about 6
(its drains are timed over a fixed 10 s window, each from a backlog sized to outlast it,
written once a sitting: now 500,000 events on SQLite, 400,000 on PostgreSQL, whose 250,000
ran out at 25,000 events/s), the peers about 12 (six of them, 3 runs each:
Procrastinate, Celery in two set-ups, Dramatiq, Huey, RQ), the other scenarios about 20
(growth about 6 a store).
Building the growth history the first time (it is kept while the schema and sizes stay) took
7 minutes a store in the sitting of 2026-12-06 on a fresh checkout, which took 51 minutes in
all; installing the peers takes a few minutes the first time. Each scenario's wall time is
logged and listed in RESULTS.md. The smoke run takes 1 to 2 minutes.

The writers' scenarios (bench/writers_plan.py): write_path also measures the same rows by
plain SQL, the document and its event alone (the ceiling of any write against the raw
commits) and the b-trees each write touches; many_writers (8 producer processes against
their raw commits, and the same two kinds by plain SQL) and flowing (producers with the
workers running, then paced at half that rate for latency) add about 3 minutes a store to
the full sitting (an estimate). The smoke run measures them on SQLite only, at small sizes.

Every system gets 16 execution slots; commits per event are counted for each one (see
RESULTS.md, section 1). The peers are installed into bench/.venv-peers (python -m venv,
then pip, pinned in bench/peers/requirements.txt) on first use. Benchmarks use their own
databases (oncefire_bench, procrastinate_bench, oncefire_growth_bench and the backlog
templates, each with BENCH_DB_SUFFIX appended), Redis db 13 and files under bench/.work;
nothing else is touched. Every scenario runs as its own process and is bounded in time; one
that fails is reported as failed, the rest go on, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchlib import (
    BENCH,
    PG_ADMIN_URL,
    ROOT,
    SRC,
    WORK,
    cpu_probe,
    log,
    machine,
    wake_probe,
    write_json,
)
from writers_plan import WRITER_SCENARIOS, WRITER_SIZES, write_path_extra, writer_plan

PEERS_VENV = BENCH / ".venv-peers"
PEERS_REQUIREMENTS = BENCH / "peers" / "requirements.txt"
SCENARIOS: tuple[str, ...] = ("throughput", "write_path", "latency", "growth", "poison")
SCENARIOS += ("idempotency", "peers", *WRITER_SCENARIOS)
SCENARIO_TIMEOUT = 1200  # seconds: no scenario process outlives this
# The growth history (10 M deliveries) is built in its first sitting, then kept.
GROWTH_TIMEOUT = 4 * 3600

PEERS = ("procrastinate", "celery", "celery-threads", "dramatiq", "huey", "rq")
SIZES = {
    # Each drain is timed over a fixed window of steady state; its backlog is sized to
    # outlast it (rate x window, plus the 2.5 % warm-up, with room to spare): a run whose
    # backlog ran out first is marked on the page.
    "full": {
        "window": 10.0,
        "backlog_sqlite": 500_000,
        "backlog_postgres": 400_000,
        "backlog_procrastinate": 15_000,
        "backlog_celery": 20_000,
        "backlog_celery_threads": 20_000,
        "backlog_dramatiq": 60_000,
        "backlog_huey": 40_000,
        "backlog_rq": 1500,
        "e2e_writes": 20_000,
        # The growth drains: a few seconds each at today's rates (a drain of 20,000 lasted
        # half a second, and what its workers' start costs on the large history showed as
        # 10 % of it: 0.90 at 20,000 events against 1.00 at 100,000, 2026-12-06).
        "n": 100_000,
        "writes": 3000,
        "latency_writes": 500,
        "history": 10_000_000,
        "dead": 1_000_000,
        "queried": 1_000_000,
        "expiring": 1_000_000,
        "growth_writes": 1000,
        "poison": 10_000,
        "idempotency": 2000,
        "max_seconds": 10.0,
        "poison_seconds": 75.0,
    },
    "quick": {
        "window": 2.0,
        "backlog_sqlite": 300,
        "backlog_postgres": 300,
        "backlog_procrastinate": 300,
        "backlog_celery": 300,
        "backlog_celery_threads": 300,
        "backlog_dramatiq": 300,
        "backlog_huey": 300,
        "backlog_rq": 100,
        "e2e_writes": 300,
        "n": 300,
        "writes": 200,
        "latency_writes": 30,
        "history": 2000,
        "dead": 200,
        "queried": 2000,
        "expiring": 2000,
        "growth_writes": 100,
        "poison": 50,
        "idempotency": 50,
        "max_seconds": 5.0,
        "poison_seconds": 15.0,
    },
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/run_all", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke sizes, 1 run, no peers")
    peers = parser.add_mutually_exclusive_group()
    peers.add_argument("--peers", dest="peers", action="store_true", default=None)
    peers.add_argument("--no-peers", dest="peers", action="store_false")
    parser.add_argument("--runs", type=int, default=None, help="measured runs (default 3)")
    parser.add_argument("--only", default=None, help=f"comma list of {', '.join(SCENARIOS)}")
    parser.add_argument("--stores", default="sqlite,postgres", help="oncefire stores to measure")
    parser.add_argument(
        "--profile", action=argparse.BooleanOptionalAction, default=None, help="py-spy profile"
    )
    parser.add_argument("--peer-e2e", action="store_true", help="end-to-end runs of the peers")
    parser.add_argument("--out", default=None, help="RESULTS.md path (results.json beside it)")
    parser.add_argument(
        "--render",
        action="store_true",
        help="only write RESULTS.md again from results.json (and the saved profiles)",
    )
    parser.add_argument(
        "--merge",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="with --render: put one scenario script's JSON into results.json as NAME (e.g.\n"
        "growth-sqlite=bench/growth-sqlite.json, soak-postgres=bench/soak-postgres.json)",
    )
    args = parser.parse_args()
    if args.merge and not args.render:
        parser.error("--merge goes with --render")
    mode = "quick" if args.quick else "full"
    args.mode = mode
    args.sizes = SIZES[mode] | WRITER_SIZES[mode]
    args.runs = args.runs or (1 if args.quick else 3)
    if args.peers is None:
        args.peers = not args.quick
    if args.profile is None:
        args.profile = not args.quick
    args.only = set(args.only.split(",")) if args.only else set(SCENARIOS)
    unknown = args.only - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    if not args.peers:
        args.only.discard("peers")
    if args.out is None:
        args.out = str(WORK / "RESULTS-quick.md") if args.quick else str(BENCH / "RESULTS.md")
    return args


# A sitting shares what is built once (harness.backlog_store); set BENCH_SITTING to share it
# across sittings (an A/B of two checkouts, one sitting each, rounds interleaved).
SITTING = os.environ.get("BENCH_SITTING") or f"{os.getpid()}-{time.time_ns()}"


def env() -> dict[str, str]:
    """Scenario processes import this checkout's oncefire and the bench modules; they share
    what is built once a sitting (harness.backlog_store)."""
    paths = [str(SRC), str(BENCH), os.environ.get("PYTHONPATH", "")]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "BENCH_SITTING": SITTING,
    }


def run_script(
    name: str, python: str, script: Path, args: list[str], timeout: float = SCENARIO_TIMEOUT
) -> dict[str, Any]:
    """Run one scenario process; its JSON result, or an error with the end of its output."""
    WORK.mkdir(parents=True, exist_ok=True)
    out = WORK / "results" / f"{name}.json"
    out.parent.mkdir(exist_ok=True)
    out.unlink(missing_ok=True)
    cmd = [python, str(script), *args, "--json", str(out)]
    tail: collections.deque[str] = collections.deque(maxlen=15)
    started = time.monotonic()
    process = subprocess.Popen(
        cmd,
        env=env(),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    try:
        for line in process.stdout:
            tail.append(line.rstrip())
            print(f"  {line.rstrip()}", file=sys.stderr, flush=True)
            if time.monotonic() - started > timeout:
                raise subprocess.TimeoutExpired(cmd, timeout)
        code = process.wait(timeout=max(1.0, timeout - (time.monotonic() - started)))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.wait()
        return {"error": f"timed out after {timeout:.0f} s", "tail": list(tail)}
    if code != 0 or not out.exists():
        return {
            "error": f"exit status {code}",
            "tail": list(tail),
            "wall_seconds": time.monotonic() - started,
        }
    result: dict[str, Any] = json.loads(out.read_text())
    result["wall_seconds"] = time.monotonic() - started
    return result


# -- the peers' virtualenv ----------------------------------------------------------------


def ensure_peers_venv() -> str:
    """bench/.venv-peers with the pinned peers; its python. Made once, then reused."""
    python = PEERS_VENV / "bin" / "python"
    digest = hashlib.sha256(PEERS_REQUIREMENTS.read_bytes()).hexdigest()
    marker = PEERS_VENV / ".requirements.sha256"
    if python.exists() and marker.exists() and marker.read_text() == digest:
        return str(python)
    log(f"installing the peers into {PEERS_VENV.relative_to(ROOT)} (once)")
    WORK.mkdir(parents=True, exist_ok=True)
    with open(WORK / "peers-install.log", "w") as out:
        subprocess.run(
            [sys.executable, "-m", "venv", str(PEERS_VENV)], check=True, stdout=out, stderr=out
        )
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "-r", str(PEERS_REQUIREMENTS)],
            check=True,
            stdout=out,
            stderr=out,
            timeout=900,
        )
    marker.write_text(digest)
    return str(python)


# -- facts about this sitting -------------------------------------------------------------


def git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def postgres_facts() -> dict[str, Any]:
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


def sitting_facts(args: argparse.Namespace) -> dict[str, Any]:
    dirty = git("status", "--porcelain", "--", "src")
    load = os.getloadavg()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": machine(),
        "load_average_at_start": [round(x, 2) for x in load],
        "cpu_probe_us_at_start": cpu_probe(),
        "wake_probe_us_at_start": wake_probe(),
        "python": sys.version.split()[0],
        "oncefire_commit": git("rev-parse", "--short", "HEAD"),
        "oncefire_src_dirty": bool(dirty) and (ROOT / "src").resolve() == SRC,
        "oncefire_src": str(SRC),
        "sqlite": sqlite3.sqlite_version,
        "postgres": postgres_facts(),
        "redis": redis_facts(),
        "settings": settings_defaults(),
        "mode": args.mode,
        "runs": args.runs,
        "sizes": args.sizes,
    }


def postgres_status() -> str | None:
    """None when oncefire runs on PostgreSQL here, else why not (checked in a subprocess)."""
    code = "import harness; print(harness.postgres_unavailable() or 'OK')"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=env(),
            cwd=BENCH,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        return "PostgreSQL store unavailable (its check timed out)"
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        err = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"PostgreSQL store unavailable ({err})"
    return None if lines[-1] == "OK" else lines[-1]


# -- the run ------------------------------------------------------------------------------


def render_again(args: argparse.Namespace) -> int:
    """RESULTS.md from a sitting's results.json, its profiles summarised again."""
    from report import render
    from where_time_goes import summarize_profile

    out = Path(args.out)
    data = out.with_name("results-quick.json" if args.quick else "results.json")
    results = json.loads(data.read_text())
    for item in args.merge:
        name, _, path = item.partition("=")
        merged = json.loads(Path(path).read_text())
        merged["merged_from"] = path
        results["oncefire"][name] = merged
        log(f"merged {path} into {data} as {name}")
    for prof in results.get("profile") or []:
        path = ROOT / prof.get("profile_file", "-")
        if "error" not in prof and path.is_file():
            prof.update(summarize_profile(path, prof.get("what", "drain")))
    write_json(data, results)
    out.write_text(render(results))
    log(f"wrote {out} from {data}")
    return 0


def main() -> int:
    args = parse_args()
    if args.render:
        return render_again(args)
    sizes = args.sizes
    started = time.monotonic()
    results: dict[str, Any] = {"facts": sitting_facts(args), "oncefire": {}, "peers": {}}
    stores = [s for s in args.stores.split(",") if s]
    unavailable = postgres_status() if "postgres" in stores else "not requested"
    if unavailable:
        log(f"oncefire on PostgreSQL: not measured ({unavailable})")
    results["postgres_unavailable"] = unavailable
    measured = [s for s in stores if s == "sqlite" or not unavailable]
    runs = ["--runs", str(args.runs)]
    cap = ["--max-seconds", str(sizes["max_seconds"])]
    py = sys.executable
    plan: list[tuple[str, str, Path, list[str]]] = []
    # The smoke run measures every scenario on SQLite and, on PostgreSQL, the ones whose
    # code paths differ most (workers, wake-ups, retries), to stay short.
    quick_postgres = {"throughput", "latency", "poison"}
    for store in measured:
        st = ["--store", store]
        only = args.only if not (args.quick and store != "sqlite") else args.only & quick_postgres
        if "throughput" in only:
            plan.append(
                (
                    f"throughput-{store}",
                    py,
                    BENCH / "throughput.py",
                    [
                        *st,
                        *runs,
                        *cap,
                        "--n",
                        str(sizes[f"backlog_{store}"]),
                        "--window",
                        str(sizes["window"]),
                        "--writes",
                        str(sizes["e2e_writes"]),
                        # The smoke run starts the 16 processes of per-event acknowledgement
                        # on SQLite only.
                        *(["--skip-per-event"] if args.quick and store != "sqlite" else []),
                    ],
                )
            )
        if "write_path" in only:
            plan.append(
                (
                    f"write_path-{store}",
                    py,
                    BENCH / "write_path.py",
                    [*st, *runs, "--writes", str(sizes["writes"]), *write_path_extra(sizes)],
                )
            )
        if "latency" in only:
            plan.append(
                (
                    f"latency-{store}",
                    py,
                    BENCH / "latency.py",
                    [*st, *runs, "--writes", str(sizes["latency_writes"])],
                )
            )
        if "growth" in only:
            plan.append(
                (
                    f"growth-{store}",
                    py,
                    BENCH / "growth.py",
                    [
                        *st,
                        *runs,
                        *cap,
                        "--n",
                        str(sizes["n"]),
                        "--history",
                        str(sizes["history"]),
                        "--dead",
                        str(sizes["dead"]),
                        "--queried",
                        str(sizes["queried"]),
                        "--expiring",
                        str(sizes["expiring"]),
                        "--writes",
                        str(sizes["growth_writes"]),
                    ],
                )
            )
        if "poison" in only:
            plan.append(
                (
                    f"poison-{store}",
                    py,
                    BENCH / "poison.py",
                    [
                        *st,
                        *runs,
                        "--max-seconds",
                        str(sizes["poison_seconds"]),
                        "--n",
                        str(sizes["poison"]),
                    ],
                )
            )
        if "idempotency" in only:
            plan.append(
                (
                    f"idempotency-{store}",
                    py,
                    BENCH / "idempotency_overhead.py",
                    [*st, *runs, *cap, "--n", str(sizes["idempotency"])],
                )
            )
        plan.extend(writer_plan(store, only, sizes, runs, py))
    failed = []
    if "peers" in args.only:
        try:
            peer_python = ensure_peers_venv()
        except (OSError, subprocess.SubprocessError) as exc:
            log(f"the peers could not be installed: {exc} (see bench/.work/peers-install.log)")
            failed.append("peers-install")
            peer_python = ""
        if peer_python:
            for peer in PEERS:
                extra = [] if args.peer_e2e else ["--skip-e2e"]
                plan.append(
                    (
                        f"peer-{peer}",
                        peer_python,
                        BENCH / "peers" / "run_peer.py",
                        [
                            "--peer",
                            peer,
                            *runs,
                            *cap,
                            "--n",
                            str(sizes[f"backlog_{peer.replace('-', '_')}"]),
                            "--window",
                            str(sizes["window"]),
                            "--latency-writes",
                            str(sizes["latency_writes"]),
                            *extra,
                        ],
                    )
                )
    for name, python, script, script_args in plan:
        log(f"== {name}")
        timeout = GROWTH_TIMEOUT if name.startswith("growth") else SCENARIO_TIMEOUT
        result = run_script(name, python, script, script_args, timeout)
        if "error" in result:
            failed.append(name)
            log(f"== {name} FAILED: {result['error']}")
        else:
            log(f"== {name} took {result['wall_seconds']:.0f} s")
        bucket = results["peers"] if name.startswith("peer-") else results["oncefire"]
        bucket[name.removeprefix("peer-")] = result
    if args.profile:
        results["profile"] = profile_gap(results, measured, args.sizes)
    results["wall_seconds"] = time.monotonic() - started
    results["facts"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results["facts"]["cpu_probe_us_at_end"] = cpu_probe()
    results["facts"]["wake_probe_us_at_end"] = wake_probe()
    from report import scenario_times

    for name, seconds in scenario_times(results):
        log(f"  {name:<24} {seconds:6.0f} s")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out.with_name("results.json" if not args.quick else "results-quick.json"), results)
    from report import render

    out.write_text(render(results))
    log(
        f"wrote {out} in {results['wall_seconds']:.0f} s"
        + (f"; FAILED: {failed}" if failed else "")
    )
    return 1 if failed else 0


def profile_gap(
    results: dict[str, Any], measured: list[str], sizes: dict[str, Any]
) -> list[dict[str, Any]]:
    """py-spy on what is furthest below its goal first: each store's drain (events/s) and its
    document writes (share of the raw commit rate); every one below its goal, or the closest
    to it when all are met. A drain is profiled on the throughput scenario's backlog, which
    outlasts the profile's window."""
    from report_page import GOAL_WRITE_RATIO, GOALS_DRAIN, med

    gaps = []
    for store in measured:
        rate = med(results["oncefire"].get(f"throughput-{store}", {}).get("drain_only"))
        if rate:
            gaps.append((GOALS_DRAIN[store] / rate, "drain", store))
        share = med(results["oncefire"].get(f"write_path-{store}", {}).get("ratio"))
        if share:
            gaps.append((GOAL_WRITE_RATIO / share, "write", store))
    gaps.sort(reverse=True)
    chosen = [g for g in gaps if g[0] > 1] or gaps[:1]
    profiles = []
    for gap, what, store in chosen:
        said = "below" if gap > 1 else "within"
        log(f"== profile: the {store} {what} path is {gap:.1f}x {said} its goal")
        result = run_script(
            f"profile-{store}-{what}",
            sys.executable,
            BENCH / "where_time_goes.py",
            ["--what", what, "--store", store]
            + (["--n", str(sizes[f"backlog_{store}"])] if what == "drain" else []),
            SCENARIO_TIMEOUT,
        )
        result["gap"] = gap
        result.setdefault("what", what)
        result.setdefault("store", store)
        profiles.append(result)
    return profiles


if __name__ == "__main__":
    sys.exit(main())
