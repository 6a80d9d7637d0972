"""The layout rules of tools/layout_check: no SQL in Python, module sizes, the App on top."""

from __future__ import annotations

import statistics
from pathlib import Path

from tools import layout_check

STORES = layout_check.SRC / "oncefire" / "stores"


def test_the_check_finds_sql_in_string_literals_and_f_strings(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text(
        '"""SELECT in a docstring is prose."""\n'
        'A = "SELECT 1"\n'
        'B = f"UPDATE oncefire_deliveries SET state = {A}"\n'
        'C = "Select the rows you want"\n',
        encoding="utf-8",
    )
    found = layout_check.sql_strings(module)
    assert [s.line for s in found] == [2, 3]


def test_no_sql_statement_is_written_in_the_stores_python() -> None:
    found = [s for p in sorted(STORES.rglob("*.py")) for s in layout_check.sql_strings(p)]
    assert found == []


def test_no_module_is_over_the_size_limit() -> None:
    sizes = layout_check.module_sizes(layout_check.SRC)
    assert {m: n for m, n in sizes.items() if n > layout_check.MAX_LINES} == {}


def test_the_median_module_is_under_the_limit() -> None:
    sizes = layout_check.module_sizes(layout_check.SRC)
    assert statistics.median(sizes.values()) < layout_check.MEDIAN_LINES


def test_no_module_below_the_app_imports_it() -> None:
    assert layout_check.app_importers() == []


def test_the_check_finds_an_app_import_below_the_app_even_under_type_checking(
    tmp_path: Path,
) -> None:
    package = tmp_path / "oncefire"
    (package / "cli").mkdir(parents=True)
    (package / "engine.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from oncefire.app import App\n",
        encoding="utf-8",
    )
    (package / "cli" / "main.py").write_text("from oncefire.app import App\n", encoding="utf-8")
    (package / "testing.py").write_text("import oncefire.app\n", encoding="utf-8")
    assert layout_check.app_importers(tmp_path) == ["oncefire/engine.py"]


def test_no_modules_of_src_import_each_other() -> None:
    assert layout_check.import_cycles() == []


def test_the_check_finds_an_import_cycle_hidden_under_type_checking(tmp_path: Path) -> None:
    package = tmp_path / "oncefire"
    package.mkdir()
    (package / "a.py").write_text("from oncefire.b import B\n", encoding="utf-8")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from oncefire import a\n",
        encoding="utf-8",
    )
    (package / "c.py").write_text("import oncefire.a\n", encoding="utf-8")
    assert layout_check.import_cycles(tmp_path) == [["oncefire.a", "oncefire.b"]]


def test_no_store_protocol_declares_more_than_twenty_methods() -> None:
    sizes = layout_check.protocol_sizes()
    assert "oncefire/stores/queue/contract.py:Queue" in sizes
    assert {k: n for k, n in sizes.items() if n > layout_check.MAX_PROTOCOL_METHODS} == {}


def test_the_check_counts_a_protocols_own_methods(tmp_path: Path) -> None:
    methods = "".join(f"    def m{i}(self) -> None: ...\n" for i in range(21))
    (tmp_path / "big.py").write_text(
        "from typing import Protocol\n"
        f"class Big(Protocol):\n{methods}"
        "class Both(Big, Protocol):\n    def extra(self) -> None: ...\n",
        encoding="utf-8",
    )
    sizes = layout_check.protocol_sizes(tmp_path)
    assert sizes == {f"{tmp_path / 'big.py'}:Big": 21, f"{tmp_path / 'big.py'}:Both": 1}
