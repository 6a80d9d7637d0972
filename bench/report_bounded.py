"""The page's bounded-growth parts (issue 12): its goal rows, and the soak with its curves."""

from __future__ import annotations

from typing import Any

from report_page import DASH, LABEL, Page, med, met

GOAL_GROWTH_RATIO = 0.90  # a rate with the large history at least 90 % of the empty store's
GOAL_STATS_MS = 20.0
GOAL_COUNT_MS = 2.0
GOAL_LIST50_MS = 20.0
GOAL_QUERY_MS = 5.0
GOAL_SWEEP_MS = 1.0
GOAL_SOAK_SIZE = 1.10  # size after 60 min over size after 20 min
GOAL_SOAK_RSS = 1.10  # workers' memory after the soak over after 5 min
# The query's memory is "independent of the collection's size" when its traced peak on the
# 1 M-document collection stays within what 10 documents and the query take: far below the
# hundred or so MiB that loading the collection into Python would (the empty store's
# collection is empty, so its figure is not a like-for-like base).
QUERY_KIB_BOUND = 64.0
PLOT_ROWS = 10


def rate_ratio(r: dict[str, Any] | None) -> tuple[str, bool | None]:
    """A loaded/empty rate ratio as the page says it, and whether it meets its goal: the
    ratio of medians within the goal. A spread that holds 1 does not meet it on its own when
    the medians are further apart than the goal allows (the runs are too spread to tell)."""
    if not r:
        return DASH, None
    spread = f"{r['ratio']:.2f} (spread {r['low']:.2f}{DASH}{r['high']:.2f})"
    if r["reads"] != "no measurable change":
        said = f"{spread}, {r['reads']}"
    elif r["ratio"] >= GOAL_GROWTH_RATIO:
        said = f"{spread}: {r['reads']}"
    else:
        said = f"{spread}: the spread holds 1, the medians {r['ratio'] - 1:+.0%}"
    return said, r["ratio"] >= GOAL_GROWTH_RATIO


def ms(value: float | None, digits: int = 2) -> str:
    return DASH if value is None else f"{value:.{digits}f} ms"


def goal_rows(page: Page) -> list[list[str]]:
    """The goal table of issue 12, one row a measure and store."""
    rows: list[list[str]] = []
    for store in ("sqlite", "postgres"):
        g = page.get(f"growth-{store}")
        label = LABEL[store]
        if not g or "error" in g:
            why = page.missing(f"growth-{store}", store) or "not run"
            rows.append([f"{label}: the growth goals", "see issue 12", why, DASH])
            continue
        size = f"{g.get('history', 0):,} history"
        if not g.get("facts"):  # the sitting's own run, not one merged after it
            label += f" (the sitting's run, commit {page.r['facts'].get('oncefire_commit', '?')})"
        loaded = g.get("loaded", {})
        for key, what in (("drain_ratio", "drain"), ("write_ratio", "document writes")):
            said, ok = rate_ratio(g.get(key))
            rows.append([f"{label} {what}, {size} vs empty", "≤ 10 % slower", said, met(ok)])
        stats = med(loaded.get("stats_ms"))
        rows.append(
            [
                f"{label} stats() over 24 h, {size}",
                f"≤ {GOAL_STATS_MS:g} ms",
                ms(stats, 1),
                met(None if stats is None else stats <= GOAL_STATS_MS),
            ]
        )
        count, listed = med(loaded.get("count_ms")), med(loaded.get("list_ms"))
        rows.append(
            [
                f"{label} dead_letters.count() / list(limit=50), "
                f"{g.get('dead_letters', 0):,} dead letters",
                f"≤ {GOAL_COUNT_MS:g} ms / ≤ {GOAL_LIST50_MS:g} ms",
                f"{ms(count)} / {ms(listed)}",
                met(
                    None
                    if count is None or listed is None
                    else count <= GOAL_COUNT_MS and listed <= GOAL_LIST50_MS
                ),
            ]
        )
        query = med(loaded.get("query_ms"))
        kib, kib_empty = med(loaded.get("query_kib")), med(g.get("empty", {}).get("query_kib"))
        flat = None if kib is None else kib <= QUERY_KIB_BOUND
        found = med(loaded.get("query_found"))
        rows.append(
            [
                f"{label} query by a declared field, limit 10, "
                f"{g.get('queried', 0):,}-document collection",
                f"≤ {GOAL_QUERY_MS:g} ms, memory independent of size",
                f"{ms(query)}; {DASH if kib is None else f'{kib:,.0f}'} KiB traced "
                f"(≤ {QUERY_KIB_BOUND:g}), {DASH if found is None else f'{found:.0f}'} found"
                f" (empty store {DASH if kib_empty is None else f'{kib_empty:,.0f}'} KiB)",
                met(None if query is None or flat is None else query <= GOAL_QUERY_MS and flat),
            ]
        )
        sweep = med(loaded.get("sweep_ms"))
        rows.append(
            [
                f"{label} TTL sweep, nothing due, {g.get('expiring', 0):,} TTL documents",
                f"≤ {GOAL_SWEEP_MS:g} ms",
                ms(sweep),
                met(None if sweep is None else sweep <= GOAL_SWEEP_MS),
            ]
        )
    for store in ("sqlite", "postgres"):
        s = page.get(f"soak-{store}")
        label = LABEL[store]
        if not s:
            rows.append([f"{label} soak", "≤ 10 % larger (size, RSS)", "not run", DASH])
            continue
        cut = "" if s.get("complete") else " (cut short)"
        last = s["samples"][-1]["minute"]
        grown, rss = s.get("size_growth"), s.get("rss_growth")
        rows.append(
            [
                f"{label} soak: store size after {last:.0f} vs {last / 3:.0f} min{cut}",
                "≤ 10 % larger",
                DASH if grown is None else f"{grown - 1:+.1%}",
                met(None if grown is None else grown <= GOAL_SOAK_SIZE),
            ]
        )
        rows.append(
            [
                f"{label} soak: workers' RSS after {last:.0f} vs {last / 12:.0f} min{cut}",
                "≤ 10 % larger",
                DASH if rss is None else f"{rss - 1:+.1%}",
                met(None if rss is None else rss <= GOAL_SOAK_RSS),
            ]
        )
    return rows


def text_plot(points: list[tuple[float, float]], unit: str) -> list[str]:
    """A small plot of (minute, value) in text: one column a sample, PLOT_ROWS rows high."""
    values = [v for _, v in points]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    levels = [round((v - low) / span * (PLOT_ROWS - 1)) for v in values]
    lines = []
    for row in range(PLOT_ROWS - 1, -1, -1):
        value = low + span * row / (PLOT_ROWS - 1)
        marks = "".join("*" if level == row else " " for level in levels)
        lines.append(f"{value:9.1f} {unit} |{marks}")
    lines.append(" " * 14 + "+" + "-" * len(points))
    end = f"{points[-1][0]:.0f} min"
    lines.append(" " * 15 + "0" + end.rjust(max(len(end) + 1, len(points) - 1)))
    return lines


def server_note(s: dict[str, Any]) -> str:
    """The PostgreSQL server the soak ran on, as the soak read it."""
    server = s.get("server") or {}
    if not server:
        return ""
    return (
        f"; the server on port {server.get('port', '?')} with autovacuum "
        f"{server.get('autovacuum', '?')} (`SHOW autovacuum`)"
    )


def soak(page: Page) -> None:
    """Section: the soak, its settings, its figures and its curves."""
    page.add(
        "## 7. Soak",
        "",
        "`bench/soak.py`: a producer writes documents at a steady rate (a transaction every "
        "100 ms) on a path whose creation starts a no-op function (`retry=False`: a "
        "retention shorter than a function's max_event_age plus its retry window is refused, "
        "and the default RetryPolicy's window is 1,860 s), and deletes each document "
        "`--window` seconds after writing it (the documents stay a fixed number; what could "
        "grow is the history); 2 worker processes run the deliveries and purge by "
        "retention. Every minute: the store's size (the SQLite file with its WAL, or the "
        "total size of PostgreSQL's oncefire tables with their indexes and TOAST), the "
        "resident memory of the worker process tree, the deliveries held and the machine's "
        "load average. Each store's paragraph says when it ran and the load beside it.",
        "",
    )
    for store in ("sqlite", "postgres"):
        s = page.get(f"soak-{store}")
        if not s:
            page.add(f"{LABEL[store]}: not run.", "")
            continue
        samples = s["samples"]
        loads = [x["load"] for x in samples if "load" in x]
        held = [x["history"] for x in samples if "history" in x]
        rate = s.get("achieved_rate") or samples[-1]["written"] / max(
            1.0, samples[-1]["minute"] * 60
        )
        retention = ", ".join(f"{k}={v:g} s" for k, v in (s.get("retention") or {}).items())
        page.add(
            f"**{LABEL[store]}**: started {s.get('started_at', '?')}, "
            f"{samples[-1]['minute']:.0f} minutes"
            + ("" if s.get("complete") else " (cut short: the figures are up to there)")
            + f", {s['rate']:,} events/s asked, {rate:,.0f} written a second on average "
            f"({samples[-1]['written']:,} in all), each document deleted "
            f"{s.get('window', 0):g} s after; {retention or 'retention as is'}"
            + (
                f"; workers with sweep_every={s['sweep_every']:g} s"
                if s.get("sweep_every") is not None
                else "; workers with the default sweep_every (5 s)"
            )
            + (
                f"; load average {min(loads):.1f}{DASH}{max(loads):.1f} over the run"
                if loads
                else ""
            )
            + (f"; deliveries held at the end {held[-1]:,} (most {max(held):,})" if held else "")
            + server_note(s)
            + f". Store size at the end / at a third of the run: {s['size_growth']:.3f}; "
            f"workers' RSS at the end / at a twelfth of the run: {s['rss_growth']:.3f}."
            + " One column a sample (a minute):",
            "",
        )
        page.add("```")
        page.add("store size")
        page.add(*text_plot([(x["minute"], x["store_bytes"] / 2**20) for x in samples], "MiB"))
        page.add("", "workers' RSS")
        page.add(*text_plot([(x["minute"], x["worker_rss_kib"] / 1024) for x in samples], "MiB"))
        page.add("```", "")
