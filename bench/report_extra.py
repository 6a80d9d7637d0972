"""The page's sections for the extra scenarios (dashboard, tables, recovery, http): each shown only
when its results are in the folder, with the date and commit of the run that made them."""

from __future__ import annotations

from typing import Any

from report_page import DASH, LABEL, Page, met

STORES = ("sqlite", "postgres")
TABLE_GOALS = {
    "one_row_insert": "one-row INSERT transactions",
    "bulk_insert": "one INSERT ... SELECT of the bulk rows",
    "unwatched_column_update": "one-row UPDATEs of a column no function watches",
}


def when(result: dict[str, Any]) -> str:
    """When and at which commit a result was measured, as its run stamped it."""
    run = result.get("run") or {}
    return f"{run.get('date', '?')}, commit `{run.get('commit', '?')}`"


def present(page: Page, scenario: str) -> list[tuple[str, dict[str, Any]]]:
    """(store, result) of each store a scenario's results are in the folder for."""
    return [(s, page.get(f"{scenario}-{s}")) for s in STORES if page.get(f"{scenario}-{s}")]


def failed(page: Page, store: str, result: dict[str, Any]) -> bool:
    """Say a failed result's error; whether it failed."""
    if "error" in result:
        page.add(f"{LABEL[store]}: failed ({result['error']}).", "")
        return True
    return False


def dashboard(page: Page) -> None:
    """Section: every dashboard page and API read timed on a large history."""
    found = present(page, "dashboard")
    if not found:
        return
    page.add(
        "## Dashboard pages",
        "",
        "`bench/dashboard_pages.py` (`bench/run_all --with dashboard`): a store bulk loaded "
        "with finished deliveries and dead letters (six attempts each) as the growth "
        "scenario loads its history; every page and API read requested through Starlette's "
        "TestClient in process, once to warm up and then the given number of times: the "
        "median, the slowest in brackets, in ms.",
        "",
    )
    for store, r in found:
        if failed(page, store, r):
            continue
        load = r.get("load_average") or []
        page.add(
            f"**{LABEL[store]}**: {r.get('history', 0):,} finished deliveries and "
            f"{r.get('dead_letters', 0):,} dead letters, {r.get('repeat')} requests each; "
            f"measured {when(r)}"
            + (f"; load average {min(load):.1f}{DASH}{max(load):.1f}" if load else "")
            + f"; {len(r['results']) - len(r.get('misses', []))} of {len(r['results'])} "
            "within their goal.",
            "",
        )
        page.table(
            ["page or call", "path", "ms", "goal ms", "met"],
            [
                [
                    x["name"],
                    f"`{x['path']}`",
                    f"{x['median_ms']:.1f} ({x['max_ms']:.0f})",
                    f"{x['goal_ms']:g}",
                    met(x["meets_goal"]),
                ]
                for x in r["results"]
            ],
        )


def tables(page: Page) -> None:
    """Section: what a watched table costs the application's own writes."""
    found = present(page, "tables")
    if not found:
        return
    page.add(
        "## Triggers on your own tables",
        "",
        "`bench/tables.py` (`bench/run_all --with tables`): the application writes a table "
        "through the raw driver, watched (an on_row_inserted function and an "
        "on_row_updated one on another column) and unwatched, alternately; no worker runs, "
        "so the cost is the trigger's capture. The figure is the watched rate as a share of "
        "the unwatched one.",
        "",
    )
    rows = []
    for store, r in found:
        if failed(page, store, r):
            continue
        figures = (r.get("results") or {}).get(store) or {}
        for key, what in TABLE_GOALS.items():
            f = figures.get(key)
            if not f:
                continue
            rows.append(
                [
                    LABEL[store],
                    what,
                    f"{f['watched_rows_per_s']:,} / {f['unwatched_rows_per_s']:,}",
                    f"{f['ratio']:.0%}",
                    f"≥ {f['goal']:.0%}",
                    met(f["met"]),
                ]
            )
        page.add(
            f"{LABEL[store]}: {r.get('rows', 0):,} one-row transactions and "
            f"{r.get('bulk', 0):,} bulk rows a run, {r.get('runs')} run(s); measured "
            f"{when(r)}.",
            "",
        )
    if rows:
        page.table(["store", "writes", "rows/s watched / unwatched", "share", "goal", "met"], rows)


HTTP_KINDS = {
    "on_request": "`app.on_request` (native)",
    "https_fn.on_request": "Firebase `https_fn.on_request` (Flask request)",
    "https_fn.on_call": "Firebase `https_fn.on_call` (callable protocol)",
}


def http_functions(page: Page) -> None:
    """Section: requests per second of an HTTP function, a Firebase one and a callable."""
    found = present(page, "http")
    if not found:
        return
    page.add(
        "## HTTP functions",
        "",
        "`bench/http_requests.py` (`bench/run_all --with http`): a real `oncefire run` on "
        "loopback serving three functions that answer a small JSON body, each request "
        "recorded as an event and an attempt in the store; client threads in the benchmark's "
        "process send requests back to back over keep-alive connections. The client and "
        "the server share the machine's cores (and the machine was shared with other work: "
        "see the load), so the figures compare the three kinds more than they bound them.",
        "",
    )
    rows = []
    for store, r in found:
        if failed(page, store, r):
            continue
        load = r.get("load_average") or []
        page.add(
            f"{LABEL[store]}: {r.get('clients')} client threads, {r.get('runs')} run(s) of "
            f"{r.get('window')} s each; measured {when(r)}"
            + (f"; load average {min(load):.1f}{DASH}{max(load):.1f}" if load else "")
            + ".",
            "",
        )
        for kind, what in HTTP_KINDS.items():
            x = (r.get("results") or {}).get(kind) or {}
            if x.get("median") is None:
                continue
            rows.append(
                [LABEL[store], what, f"{x['median']:,.0f} ({x['min']:,.0f}{DASH}{x['max']:,.0f})"]
            )
    if rows:
        page.table(["store", "function", f"requests/s, median (min{DASH}max)"], rows)


def recovery(page: Page) -> None:
    """Section: real worker processes killed, idle and woken."""
    r = page.get("recovery-sqlite")
    if not r:
        return
    page.add(
        "## Crash recovery and idle workers",
        "",
        "`bench/recovery.py` (`bench/run_all --with recovery`), `oncefire worker` processes "
        "on a SQLite file: a function's first attempt is killed (SIGKILL) at a random point "
        "between two lease renewals, and the time from the kill until the attempt is "
        "recorded as crashed (rescued) and until it runs again is taken; then an idle "
        f"worker's CPU and the write → start time of events published to it. Measured {when(r)}.",
        "",
    )
    if failed(page, "sqlite", r):
        return
    rows = []
    for key in ("recovery_test_timings", "recovery_default_timings"):
        x = r.get(key)
        if x:
            rows.append(
                [
                    f"recovery after SIGKILL ({x['settings']}), {x['samples']} runs",
                    f"rescued after {span(x['rescue_s'])} s, running again after "
                    f"{span(x['rerun_s'])} s",
                ]
            )
    idle = r.get("idle") or {}
    if idle:
        wake = idle["wakeup_ms"]
        rows.append(
            [
                f"idle worker process, {idle['idle_window_s']:g} s window",
                f"{idle['idle_worker_cpu_percent']:.2f} % of one core; supervisor "
                f"{idle['idle_supervisor_cpu_percent']:.2f} %",
            ]
        )
        rows.append(
            [
                f"write → start on an idle worker, {wake['samples']} events",
                f"median {wake['median']} ms, p95 {wake['p95']} ms, max {wake['max']} ms",
            ]
        )
    page.table(["figure", "result"], rows)


def span(x: dict[str, float]) -> str:
    """'min to max (median m)' of a recovery figure."""
    return f"{x['min']:.2f}{DASH}{x['max']:.2f} (median {x['median']:.2f})"
