"""The layout rules of tools/layout_check: SQL, sizes, folders, protocols, layers,
driver connections, the one SQL loader."""

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


def test_no_folder_holds_more_than_about_fifteen_modules() -> None:
    sizes = layout_check.folder_sizes()
    assert {f: n for f, n in sizes.items() if n > layout_check.MAX_FOLDER_MODULES} == {}


def test_the_check_counts_a_folders_modules_without_its_init(tmp_path: Path) -> None:
    package = tmp_path / "oncefire" / "engine"
    package.mkdir(parents=True)
    for name in ("__init__", *(f"m{i}" for i in range(16))):
        (package / f"{name}.py").write_text("", encoding="utf-8")
    assert layout_check.folder_sizes(tmp_path) == {"oncefire/engine": 16}


def test_no_module_stands_at_the_cap() -> None:
    sizes = layout_check.module_sizes(layout_check.SRC)
    assert {m: n for m, n in sizes.items() if n >= layout_check.NEAR_CAP} == {}


def test_no_store_protocol_declares_more_than_about_twenty_methods() -> None:
    sizes = layout_check.protocol_sizes()
    assert sizes, "the check found no Protocol under stores/"
    assert {c: n for c, n in sizes.items() if n > layout_check.MAX_PROTOCOL_METHODS} == {}


def test_the_check_counts_a_protocols_own_methods(tmp_path: Path) -> None:
    stores = tmp_path / "oncefire" / "stores"
    stores.mkdir(parents=True)
    methods = "".join(f"    def m{i}(self) -> None: ...\n" for i in range(21))
    (stores / "base.py").write_text(
        "from typing import Protocol\n"
        f"class Wide(Protocol):\n{methods}"
        "class Narrow(Wide, Protocol):\n    def one(self) -> None: ...\n"
        "class Plain:\n    def m(self) -> None: ...\n",
        encoding="utf-8",
    )
    assert layout_check.protocol_sizes(stores) == {
        "oncefire/stores/base.py:Wide": 21,
        "oncefire/stores/base.py:Narrow": 1,
    }


def test_no_lower_layer_imports_a_shell() -> None:
    assert layout_check.shell_importers() == []


def test_the_check_finds_a_lower_layer_importing_a_shell(tmp_path: Path) -> None:
    engine = tmp_path / "oncefire" / "engine"
    engine.mkdir(parents=True)
    (engine / "worker.py").write_text(
        "from oncefire.web.server import serve\nfrom oncefire.model import paths\n",
        encoding="utf-8",
    )
    assert layout_check.shell_importers(tmp_path) == [
        "oncefire/engine/worker.py -> oncefire.web.server.serve"
    ]


def test_module_docstrings_are_short() -> None:
    assert layout_check.long_docstrings() == {}


def test_the_check_counts_a_docstrings_prose_not_its_table(tmp_path: Path) -> None:
    prose = "\n".join(f"line {i}" for i in range(11))
    table = "\n".join(f"| state {i} | event |" for i in range(30))
    (tmp_path / "long.py").write_text(f'"""{prose}"""\n', encoding="utf-8")
    rows = "\n".join(f"    state {i}  an event  -> state {i + 1}" for i in range(30))
    (tmp_path / "table.py").write_text(f'"""Holds.\n\n{table}\n"""\n', encoding="utf-8")
    (tmp_path / "rows.py").write_text(f'"""Holds.\nThe rule:\n\n{rows}\n"""\n', encoding="utf-8")
    assert layout_check.long_docstrings(tmp_path) == {"long.py": 11}


def test_no_driver_connection_is_reached_outside_the_stores() -> None:
    assert layout_check.conn_accesses() == []


def test_the_check_finds_a_driver_connection_outside_the_stores(tmp_path: Path) -> None:
    package = tmp_path / "oncefire"
    (package / "stores").mkdir(parents=True)
    (package / "web").mkdir()
    (package / "stores" / "sqlite.py").write_text("def f(tx):\n    return tx.conn\n", "utf-8")
    (package / "web" / "views.py").write_text(
        "def rows(tx):\n    '''tx.conn in prose is fine.'''\n    return tx.conn.execute('x')\n",
        encoding="utf-8",
    )
    assert layout_check.conn_accesses(tmp_path) == ["oncefire/web/views.py:3"]


def test_only_the_sql_loader_reads_sql_files() -> None:
    assert layout_check.sql_readers() == [layout_check.SQL_LOADER]


def test_the_check_finds_a_second_sql_loader(tmp_path: Path) -> None:
    stores = tmp_path / "oncefire" / "stores"
    stores.mkdir(parents=True)
    (stores / "queries.py").write_text("def load(p):\n    return p.glob('*.sql')\n", "utf-8")
    (stores / "history.py").write_text(
        '"""Runs the queries of audit.sql."""\n'
        "def named(folder):\n    return (folder / 'audit.sql').read_text()\n",
        encoding="utf-8",
    )
    (stores / "cost.py").write_text('"""Reads cost.sql through queries.py."""\n', "utf-8")
    assert layout_check.sql_readers(tmp_path) == [
        "oncefire/stores/history.py",
        layout_check.SQL_LOADER,
    ]
