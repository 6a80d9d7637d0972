"""The results folder (bench/results/) that RESULTS.md is rendered from: one JSON file a
measurement, and run.json.

run.json holds the facts of the last full run of bench/run_all (machine, load, commit, sizes,
where its time went, its profiles). Every other file is one measurement (`throughput-sqlite`,
`peer-celery`), stamped with the run that made it. A run of chosen scenarios (`--only`)
replaces their files and keeps the rest; the page says which files come from another run
than run.json's, and when they were measured.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchlib import ROOT, write_json

RUN = "run.json"


def shown(path: Path) -> str:
    """A path as the page shows it: relative to the checkout when inside it."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def save(folder: Path, name: str, result: dict[str, Any], facts: dict[str, Any]) -> None:
    """One measurement's result, stamped with the run that made it."""
    result["run"] = {
        "id": facts["run_id"],
        "date": facts["date"],
        "commit": facts["oncefire_commit"],
    }
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / f"{name}.json", result)


def has_run(folder: Path) -> bool:
    return (folder / RUN).is_file()


def save_run(folder: Path, run: dict[str, Any]) -> None:
    """The facts of a full run (and its profiles, wall time and what was unavailable)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / RUN, run)


def load(folder: Path) -> dict[str, Any]:
    """Everything the page is rendered from: run.json's keys, "oncefire" and "peers" (each
    result by name). A result from another run than run.json's gets "merged_from", its file."""
    results: dict[str, Any] = json.loads((folder / RUN).read_text())
    results["oncefire"], results["peers"] = {}, {}
    run_id = results["facts"].get("run_id")
    for path in sorted(folder.glob("*.json")):
        if path.name == RUN:
            continue
        result = json.loads(path.read_text())
        if (result.get("run") or {}).get("id") != run_id:
            result["merged_from"] = shown(path)
        if path.stem.startswith("peer-"):
            results["peers"][path.stem.removeprefix("peer-")] = result
        else:
            results["oncefire"][path.stem] = result
    results["folder"] = shown(folder)
    return results
