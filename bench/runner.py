"""bench/run_all: oncefire and its peers measured, into bench/results/ and bench/RESULTS.md.

    bench/run_all                 # every default scenario: 3 runs each, with the peers
    bench/run_all --quick         # smoke sizes, 1 run, oncefire only (what CI runs)
    bench/run_all --with soak     # the default scenarios and an extra one
    bench/run_all --only latency,flowing --stores sqlite   # chosen scenarios only
    bench/run_all --render        # RESULTS.md again from bench/results/, nothing measured

Each measurement is one process, bounded in time, that writes its result as JSON; the
runner keeps it in the results folder (bench/results/, or bench/.work/quick/results/ for the
smoke run) as <scenario>-<store>.json or peer-<name>.json, and renders the page from the
folder. A full run (no --only) also rewrites run.json, the facts of the run (machine, load,
commit, sizes, where the time went); a run with --only replaces only its scenarios' files,
and the page says which results come from another run than run.json's.

The default scenarios are in bench/scenarios.py (DEFAULT); the extra ones (soak: an hour of
steady writes with retention; dashboard: every page on a large history; tables: triggers on
the application's own tables; recovery: crash recovery, idle CPU and wake-up of real worker
processes; http: requests per second of HTTP, Firebase HTTP and callable functions) run only
when named with --with or --only. RESULTS.md lists each measurement's
wall time. The peers are installed into bench/.venv-peers (python -m venv, then pip, pinned
in bench/peers/requirements.txt) on first use. Benchmarks use their own databases
(oncefire_bench, procrastinate_bench, oncefire_growth_bench and the backlog templates, each
with BENCH_DB_SUFFIX appended), Redis db 13 and files under bench/.work; nothing else is
touched. A measurement that fails is reported as failed, the rest go on, and the exit status
is 1.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import results_folder
from benchlib import BENCH, ROOT, SRC, WORK, cpu_probe, log, wake_probe
from run_facts import run_facts
from scenarios import (
    DEFAULT,
    EXTRA,
    SIZES,
    TIMEOUT,
    Step,
    oncefire_steps,
    peer_steps,
)

PEERS_VENV = BENCH / ".venv-peers"
PEERS_REQUIREMENTS = BENCH / "peers" / "requirements.txt"


def names(text: str, parser: argparse.ArgumentParser, option: str) -> set[str]:
    """A comma list of scenario names, checked."""
    chosen = {name for name in text.split(",") if name}
    unknown = chosen - set(DEFAULT) - set(EXTRA)
    if unknown:
        parser.error(f"{option}: unknown scenario(s): {', '.join(sorted(unknown))}")
    return chosen


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/run_all", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke sizes, 1 run, no peers")
    peers = parser.add_mutually_exclusive_group()
    peers.add_argument("--peers", dest="peers", action="store_true", default=None)
    peers.add_argument("--no-peers", dest="peers", action="store_false")
    parser.add_argument("--runs", type=int, default=None, help="measured runs (default 3)")
    parser.add_argument("--only", default=None, help=f"comma list of {', '.join(DEFAULT + EXTRA)}")
    parser.add_argument(
        "--with",
        dest="extra",
        default="",
        help=f"comma list of extra scenarios run beside the default ones: {', '.join(EXTRA)}",
    )
    parser.add_argument("--stores", default="sqlite,postgres", help="oncefire stores to measure")
    parser.add_argument(
        "--profile", action=argparse.BooleanOptionalAction, default=None, help="py-spy profile"
    )
    parser.add_argument("--peer-e2e", action="store_true", help="end-to-end runs of the peers")
    parser.add_argument(
        "--out", default=None, help="RESULTS.md path (its results folder is results/ beside it)"
    )
    parser.add_argument(
        "--render",
        action="store_true",
        help="only write RESULTS.md again from its results folder (and the saved profiles)",
    )
    args = parser.parse_args()
    args.mode = "quick" if args.quick else "full"
    args.sizes = SIZES[args.mode]
    args.runs = args.runs or (1 if args.quick else 3)
    args.is_full = args.only is None
    only = names(args.only, parser, "--only") if args.only is not None else set(DEFAULT)
    args.only = only | names(args.extra, parser, "--with")
    if args.peers is None:
        args.peers = not args.quick
    if not args.peers:
        args.only.discard("peers")
    if args.profile is None:
        args.profile = args.is_full and not args.quick
    if args.out is None:
        args.out = str(WORK / "quick" / "RESULTS.md" if args.quick else BENCH / "RESULTS.md")
    return args


# A run shares what is built once (oncefire_harness.backlog_store); set BENCH_SITTING to share
# it across runs (an A/B of two checkouts, one run each, rounds interleaved).
RUN_ID = os.environ.get("BENCH_SITTING") or f"{os.getpid()}-{time.time_ns()}"


def env() -> dict[str, str]:
    """Scenario processes import this checkout's oncefire and the bench modules; they share
    what is built once a run (oncefire_harness.backlog_store)."""
    paths = [str(SRC), str(BENCH), os.environ.get("PYTHONPATH", "")]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "BENCH_SITTING": RUN_ID,
    }


def run_script(
    name: str, python: str, script: Path, args: list[str], timeout: float = TIMEOUT
) -> dict[str, Any]:
    """Run one scenario process; its JSON result, or an error with the end of its output."""
    WORK.mkdir(parents=True, exist_ok=True)
    out = WORK / "out" / f"{name}.json"
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


def postgres_status() -> str | None:
    """None when oncefire runs on PostgreSQL here, else why not (checked in a subprocess)."""
    code = "import oncefire_harness as h; print(h.postgres_unavailable() or 'OK')"
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


def render_page(folder: Path, page: Path) -> None:
    """RESULTS.md from its results folder, the saved profiles summarised again."""
    from report import render
    from where_time_goes import summarize_profile

    results = results_folder.load(folder)
    for prof in results.get("profile") or []:
        path = ROOT / prof.get("profile_file", "-")
        if "error" not in prof and path.is_file():
            prof.update(summarize_profile(path, prof.get("what", "drain")))
    page.write_text(render(results))
    log(f"wrote {page} from {results_folder.shown(folder)}")


def plan_steps(args: argparse.Namespace, measured: list[str]) -> tuple[list[Step], list[str]]:
    """The measurements of this run, and what failed before any ran (the peers' install)."""
    plan: list[Step] = []
    for store in measured:
        plan += oncefire_steps(store, args.only, args.sizes, args.runs, args.quick, sys.executable)
    if "peers" not in args.only:
        return plan, []
    try:
        python = ensure_peers_venv()
    except (OSError, subprocess.SubprocessError) as exc:
        log(f"the peers could not be installed: {exc} (see bench/.work/peers-install.log)")
        return plan, ["peers-install"]
    return plan + peer_steps(python, args.sizes, args.runs, args.peer_e2e), []


def main() -> int:
    args = parse_args()
    page = Path(args.out)
    folder = page.parent / "results"
    if args.render:
        render_page(folder, page)
        return 0
    started = time.monotonic()
    facts = run_facts(RUN_ID, args.mode, args.runs, args.sizes)
    stores = [s for s in args.stores.split(",") if s]
    unavailable = postgres_status() if "postgres" in stores else "not requested"
    if unavailable:
        log(f"oncefire on PostgreSQL: not measured ({unavailable})")
    measured = [s for s in stores if s == "sqlite" or not unavailable]
    plan, failed = plan_steps(args, measured)
    results: dict[str, dict[str, Any]] = {}
    for step in plan:
        log(f"== {step.name}")
        result = run_script(step.name, step.python, step.script, step.args, step.timeout)
        if "error" in result:
            failed.append(step.name)
            log(f"== {step.name} FAILED: {result['error']}")
        else:
            log(f"== {step.name} took {result['wall_seconds']:.0f} s")
        results[step.name] = result
        results_folder.save(folder, step.name, result, facts)
    for name, result in results.items():
        log(f"  {name:<24} {result.get('wall_seconds', 0):6.0f} s")
    if args.is_full or not results_folder.has_run(folder):
        run: dict[str, Any] = {"facts": facts, "postgres_unavailable": unavailable}
        if args.profile:
            run["profile"] = profile_gap(results, measured, args.sizes)
        run["wall_seconds"] = time.monotonic() - started
        facts["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        if not args.quick:
            facts["cpu_probe_us_at_end"] = cpu_probe()
            facts["wake_probe_us_at_end"] = wake_probe()
        results_folder.save_run(folder, run)
    render_page(folder, page)
    log(f"done in {time.monotonic() - started:.0f} s" + (f"; FAILED: {failed}" if failed else ""))
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
        rate = med(results.get(f"throughput-{store}", {}).get("drain_only"))
        if rate:
            gaps.append((GOALS_DRAIN[store] / rate, "drain", store))
        share = med(results.get(f"write_path-{store}", {}).get("ratio"))
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
            TIMEOUT,
        )
        result["gap"] = gap
        result.setdefault("what", what)
        result.setdefault("store", store)
        profiles.append(result)
    return profiles


if __name__ == "__main__":
    sys.exit(main())
