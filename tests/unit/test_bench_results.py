"""bench/RESULTS.md is rendered from bench/results/, and bench/run_all's plan keeps the extra
scenarios behind their flag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.bench_modules import BENCH, load_bench


def facts(run_id: str) -> dict[str, Any]:
    return {"run_id": run_id, "date": "2026-12-07 10:00 UTC", "oncefire_commit": "abc1234"}


def test_committed_page_is_rendered_from_the_results_folder() -> None:
    folder = load_bench("results_folder")
    report = load_bench("report")
    results = folder.load(BENCH / "results")
    assert report.render(results) == (BENCH / "RESULTS.md").read_text()


def test_results_from_another_run_are_marked_with_their_file(tmp_path: Path) -> None:
    folder = load_bench("results_folder")
    folder.save_run(tmp_path, {"facts": facts("full")})
    folder.save(tmp_path, "latency-sqlite", {"p50_ms": 1.0}, facts("full"))
    folder.save(tmp_path, "soak-sqlite", {"samples": []}, facts("later"))
    folder.save(tmp_path, "peer-huey", {"drain_only": {}}, facts("full"))
    results = folder.load(tmp_path)
    assert "merged_from" not in results["oncefire"]["latency-sqlite"]
    assert results["oncefire"]["soak-sqlite"]["merged_from"].endswith("soak-sqlite.json")
    assert results["oncefire"]["soak-sqlite"]["run"]["commit"] == "abc1234"
    assert set(results["peers"]) == {"huey"}


def test_extra_scenarios_run_only_when_named() -> None:
    scenarios = load_bench("scenarios")
    sizes = scenarios.SIZES["quick"]

    def names(only: set[str], store: str = "sqlite", quick: bool = True) -> set[str]:
        steps = scenarios.oncefire_steps(store, only, sizes, 1, quick, "python")
        return {step.name for step in steps}

    default = names(set(scenarios.DEFAULT))
    assert not {n for n in default if n.split("-")[0] in scenarios.EXTRA}
    assert "throughput-sqlite" in default
    extra = names(set(scenarios.DEFAULT) | set(scenarios.EXTRA))
    assert {"soak-sqlite", "dashboard-sqlite", "tables-sqlite", "recovery-sqlite"} <= extra
    assert names(set(scenarios.DEFAULT), "postgres") == {
        f"{name}-postgres" for name in scenarios.QUICK_POSTGRES
    }
    assert "recovery-postgres" not in names(set(scenarios.EXTRA), "postgres", quick=False)


def test_every_step_names_a_script_of_the_suite() -> None:
    scenarios = load_bench("scenarios")
    only = set(scenarios.DEFAULT) | set(scenarios.EXTRA)
    steps = [
        step
        for store in ("sqlite", "postgres")
        for step in scenarios.oncefire_steps(store, only, scenarios.SIZES["full"], 3, False, "py")
    ]
    steps += scenarios.peer_steps("py", scenarios.SIZES["full"], 3, e2e=False)
    assert all(step.script.is_file() for step in steps)
