"""RESULTS.md: where the time goes, from the py-spy profile of a sitting."""

from __future__ import annotations

from typing import Any

from report_page import (
    GOALS_DRAIN,
    LABEL,
    TIMES,
    Page,
    med,
)


def where_time_goes(page: Page) -> None:
    profiles = page.r.get("profile")
    page.add("## Where the time goes", "")
    if not profiles:
        page.add(
            "Not profiled in this sitting (`--profile` runs py-spy on what is furthest below "
            "its goal: a store's drain or its write path).",
            "",
        )
        return
    for i, prof in enumerate(profiles):
        store = prof.get("store", "?")
        if "error" in prof:
            page.add(f"The profile failed: {prof['error']}.", "")
            continue
        label = LABEL.get(store, store)
        gap = prof.get("gap", 0)
        lead = "The largest gap is the" if i == 0 else "Next, the"
        said = f"{gap:.1f}{TIMES} below its goal" if gap > 1 else "within its goal (all are met)"
        if prof.get("what") == "write":
            page.add(
                f"### {label} write path",
                "",
                f"{lead} **{label} write path** (document writes against raw commits), {said}. "
                f"py-spy sampled one process writing documents, one transaction each with one "
                f"trigger registered, for {prof.get('seconds', 0):.0f} s "
                f"({prof.get('writes_per_second_under_profiler', 0):,.0f} writes/s under the "
                "profiler), idle time included so that waiting for the disk or the server "
                f"shows: `{prof.get('command')}`. The speedscope file is "
                f"`{prof.get('profile_file')}` (open it at speedscope.app).",
                "",
            )
        else:
            page.add(
                f"### {label} drain",
                "",
                f"{lead} **{label} drain**, {said}. py-spy sampled every thread of both "
                f"worker processes for {prof.get('seconds', 0):.0f} s of a drain "
                f"({prof.get('events_per_second_under_profiler', 0):,.0f} events/s under the "
                "profiler"
                + (
                    "; **its backlog ran out**, so idle time after it counts"
                    if prof.get("backlog_ran_out")
                    else ""
                )
                + "), idle threads included so that waiting shows: "
                f"`{prof.get('command')}`. The speedscope file is `{prof.get('profile_file')}` "
                "(open it at speedscope.app).",
                "",
            )
        for group, rows in prof.get("threads", {}).items():
            if group == "other threads":
                continue
            page.table(
                [f"{group}: time by operation / phase", "share"],
                [[r["what"], f"{r['share']:.1%}"] for r in rows],
            )
        page.table(
            ["busy time (idle excluded) by store operation / phase", "share"],
            [[r["what"], f"{r['share']:.1%}"] for r in prof.get("busy_by_operation_and_phase", [])],
        )
        page.table(
            ["hottest lines (busy time)", "share"],
            [[f"`{r['what']}`", f"{r['share']:.1%}"] for r in prof.get("top_leaves", [])[:6]],
        )
        if prof.get("what") != "write":
            page.add(*interpret(page, prof), "")


def interpret(page: Page, prof: dict[str, Any]) -> list[str]:
    """What the profile and the other scenarios say together, in a few sentences."""
    store = prof.get("store", "sqlite")
    label = LABEL.get(store, store)
    lines = []
    threads = prof.get("threads", {})
    loop = threads.get("loop thread (claims, records, waits)", [])
    attempts = threads.get("attempt threads (run the functions)", [])
    idle_loop = next((r["share"] for r in loop if r["what"].startswith("idle")), 0.0)
    awaiting = next((r["share"] for r in loop if r["what"].startswith("waiting for its")), 0.0)
    idle_attempts = next((r["share"] for r in attempts if r["what"].startswith("idle")), 0.0)
    if loop:
        top = ", ".join(f"{r['what']} {r['share']:.0%}" for r in loop[:4])
        lines.append(
            f"- Each worker process's loop thread is busy {1 - idle_loop - awaiting:.0%} of "
            f"the time ({top}), while its attempt threads are idle {idle_attempts:.0%} of the "
            "time: the loop that claims and records, one store transaction after the other, "
            "is the bottleneck, not the functions."
        )
    if awaiting >= 0.05:
        lines.append(
            f"- The loop waits {awaiting:.0%} of the time for attempts it started to end, "
            "while their threads are mostly idle: the wait is the hand-over of each attempt to "
            "a thread and back (a wake-up, a turn at the interpreter lock, on cores the other "
            "process shares), not the functions' own time."
        )
    sql = page.get(f"idempotency-{store}").get("sql_per_event", {}).get("noop")
    if sql:
        commits = sql.get("commits_per_event")
        lines.append(
            f"- Counted in an in-process drain, one no-op event costs "
            f"{sql['statements_per_event']:.1f} statements"
            + (f" and {commits:.2f} commits" if commits is not None else "")
            + " (its share of a batch claim and a batch record)."
        )
    raw = med(page.get(f"write_path-{store}").get("raw_commit_rate"))
    if raw:
        need = GOALS_DRAIN.get(store, 0) / raw
        lines.append(
            f"- The raw durable commit rate on {label} here is {raw:,.0f}/s: the goal of "
            f"{GOALS_DRAIN.get(store, 0):,.0f} events/s needs at least {need:.1f} events per "
            "commit, over the claim and the record of each batch together."
        )
    return lines
