"""The dashboard's goals, measured: every page and API call under 100 ms with a large history,
the dead-letter badge's refresh under 10 ms.

The history is growth.py's faithful bulk load (one success and one dead letter run through
oncefire, then cloned by SQL): by default 1,000,000 finished deliveries (one attempt each)
and 100,000 dead letters (six attempts each), 1.6 M attempts in all; --history 10000000
--dead 1000000 for the issue's size. The loaded store is built once (kept under bench/.work,
or in the dashboard_bench PostgreSQL database) and reused while its size and schema match.

Each page and API call is requested through Starlette's TestClient (in process: the time is
the dashboard's and the store's, without a network), once to warm up and then --repeat times;
the table shows the median and the slowest. The machine's load average is recorded: other
work on the machine shows in the figures.

    python bench/dashboard_pages.py --store sqlite [--history N --dead N --repeat 11]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
from typing import Any
from urllib.parse import quote

import growth_seed
import growth_store
from benchlib import ensure_database, log, write_json
from oncefire_harness import Target, reset, target

from oncefire import App

PAGE_GOAL_MS, BADGE_GOAL_MS = 100.0, 10.0


def loaded(kind: str, history: int, dead: int) -> Target:
    """The store with the history, built unless a matching one is kept."""
    t = target(kind, "dashboard-kept" if kind == "sqlite" else "dashboard")
    if kind == "postgres":
        ensure_database(t.url.rsplit("/", 1)[1])
    probe = target(kind, "dashboard-probe" if kind == "sqlite" else "dashboard_probe")
    reset(probe)
    App(probe.url).store  # noqa: B018 - a fresh schema, to read its signature
    key = f"{growth_store.LOADER_VERSION}-{growth_store.schema_signature(probe)}-{history}-{dead}"
    if stored_key(t) != key:
        reset(t)
        log(f"building the {t.label} store ({history:,} finished + {dead:,} dead letters)")
        growth_seed.bulk_load(t, history, dead, queried=0, expiring=0)
        with growth_seed.connect(t) as conn:
            conn.execute("CREATE TABLE bench_dashboard_meta (key text)")
            conn.execute(
                "INSERT INTO bench_dashboard_meta VALUES ("
                + ("?" if kind == "sqlite" else "%s")
                + ")",
                (key,),
            )
    return t


def stored_key(t: Target) -> str | None:
    if t.kind == "sqlite" and (t.path is None or not t.path.exists()):
        return None
    try:
        with growth_seed.connect(t) as conn:
            row = conn.execute("SELECT key FROM bench_dashboard_meta").fetchone()
    except Exception:  # no such table: not built yet
        return None
    return None if row is None else str(row[0])


def bench_app(t: Target) -> App:
    """The app the history was made by: the same two functions."""
    logging.getLogger("oncefire").setLevel(logging.ERROR)
    app = App(t.url)
    app.on_document_created("bench/{id}", name="noop")(lambda event: None)
    app.on_document_created("poison/{id}", name="poison")(lambda event: None)
    return app


def requests(app: App) -> list[tuple[str, str, float]]:
    """(name, path, goal in ms) of every page and API read of the dashboard."""
    [letter] = app.dead_letters.list("poison", 1)
    d, e = letter.id, letter.event_id
    fn = "/api/functions/poison"
    group = quote(app.history.dead_letter_groups("poison", 1)[0].error)
    pages = [
        ("functions page", "/"),
        ("function: triggers tab", "/functions/poison?tab=triggers"),
        ("function: dead letters tab", "/functions/poison?tab=dead-letters"),
        ("function: dead letters by error", "/functions/poison?tab=dead-letters&error=poison"),
        ("function: dead letters, rare error", "/functions/poison?tab=dead-letters&error=zzz"),
        ("function: dead letters of a group", f"/functions/poison?tab=dead-letters&group={group}"),
        ("function: executions tab", "/functions/poison?tab=executions"),
        ("function: executions, failed", "/functions/poison?tab=executions&outcome=failed"),
        ("function (successes): triggers", "/functions/noop?tab=triggers"),
        ("dead letter page", f"/dead-letters/{d}"),
        ("event page", f"/events/{e}"),
        ("audit page", "/audit"),
        ("metrics", "/metrics"),
        ("api functions", "/api/functions"),
        ("api function", fn),
        ("api dead letters", f"{fn}/dead-letters"),
        ("api dead letters by error", f"{fn}/dead-letters?error=poison"),
        ("api executions", f"{fn}/executions"),
        ("api dead letter", f"/api/dead-letters/{d}"),
        ("api event", f"/api/events/{e}"),
        ("api audit", "/api/audit"),
        ("api openapi.json", "/api/openapi.json"),
    ]
    out = [(name, path, PAGE_GOAL_MS) for name, path in pages]
    out.append(("badge refresh (dead-letter count)", f"{fn}/dead-letters/count", BADGE_GOAL_MS))
    out.append(("api count by error", f"{fn}/dead-letters/count?error=poison", PAGE_GOAL_MS))
    out.append(("api count of a group", f"{fn}/dead-letters/count?group={group}", PAGE_GOAL_MS))
    return out


def calls(app: App) -> list[tuple[str, Any]]:
    """The library reads behind the pages, each timed on its own: which one makes a page slow."""
    from oncefire.web.dashboard.views import DAY

    group = app.history.dead_letter_groups("poison", 1)[0].error

    return [
        ("app.stats(24 h): outcomes, durations, states", lambda: app.stats(DAY)),
        ("history.backlog(): pending by function", app.history.backlog),
        ("history.attempts_per_hour(poison)", lambda: app.history.attempts_per_hour("poison")),
        ("history.attempts_per_hour(noop)", lambda: app.history.attempts_per_hour("noop")),
        ("dead_letters.count(poison)", lambda: app.dead_letters.count("poison")),
        (
            "dead_letters.count(poison, error=...)",
            lambda: app.dead_letters.count("poison", error_contains="poison"),
        ),
        (
            "dead_letters.search(poison, error=...)",
            lambda: app.dead_letters.search("poison", "poison"),
        ),
        (
            "dead_letters.count(poison, error_group=...)",
            lambda: app.dead_letters.count("poison", error_group=group),
        ),
        (
            "dead_letters.count_group(poison, group)",
            lambda: app.dead_letters.count_group("poison", group),
        ),
        ("history.dead_letter_groups(poison)", lambda: app.history.dead_letter_groups("poison")),
        ("dead_letters.list(poison, 50)", lambda: app.dead_letters.list("poison", 50)),
        ("history.executions(poison)", lambda: app.history.executions("poison")),
    ]


def timed(call: Any, repeat: int) -> tuple[float, float]:
    """(median, max) in ms of repeat calls, after one to warm up."""
    call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), max(times)


def measure(app: App, repeat: int) -> list[dict[str, Any]]:
    from starlette.testclient import TestClient

    from oncefire.web.dashboard import create_app

    client = TestClient(create_app(app), base_url="http://127.0.0.1")
    results = []
    for name, path, goal in requests(app):
        first = client.get(path)
        assert first.status_code == 200, (path, first.status_code, first.text[:300])
        median, slowest = timed(lambda path=path: client.get(path), repeat)
        results.append(
            {
                "name": name,
                "path": path,
                "median_ms": round(median, 2),
                "max_ms": round(slowest, 2),
                "goal_ms": goal,
                "meets_goal": median < goal,
            }
        )
        verdict = "ok" if median < goal else "MISS"
        log(f"  {name:<36} {median:9.1f} ms  (max {slowest:8.1f})  {verdict}")
    return results


def measure_calls(app: App, repeat: int) -> dict[str, float]:
    """The median of each library read, in ms."""
    out = {}
    log("the library reads behind the pages:")
    for name, call in calls(app):
        median, slowest = timed(call, repeat)
        out[name] = round(median, 2)
        log(f"  {name:<46} {median:9.1f} ms  (max {slowest:8.1f})")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--history", type=int, default=1_000_000)
    parser.add_argument("--dead", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--json", default=None, help="write the result here (default stdout)")
    args = parser.parse_args()
    t = loaded(args.store, args.history, args.dead)
    app = bench_app(t)
    load_before = os.getloadavg()
    log(f"{t.label}: {args.history:,} finished deliveries, {args.dead:,} dead letters")
    results = measure(app, args.repeat)
    reads = measure_calls(app, args.repeat)
    app.close()
    run = {
        "store": t.label,
        "history": args.history,
        "dead_letters": args.dead,
        "attempts": args.history + 6 * args.dead,
        "repeat": args.repeat,
        "load_average": [round(x, 2) for x in (*load_before, *os.getloadavg())],
        "cpus": os.cpu_count(),
        "at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "results": results,
        "misses": [r["name"] for r in results if not r["meets_goal"]],
        "library_reads_ms": reads,
    }
    write_json(args.json, run)
    log(f"{len(results) - len(run['misses'])} of {len(results)} meet their goal")


if __name__ == "__main__":
    main()
