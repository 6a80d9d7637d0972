"""How the code is laid out: SQL kept out of Python, sizes, folders, protocols and layers.

    python -m tools.layout_check          # prints the report; exit 1 if a rule is broken

Rules (tests/unit/test_layout.py asserts each, and that the check finds it broken): no SQL
in a string literal of src/**/*.py; no module over 400 lines nor at 395-400, a median under
150; no folder of over 15 modules; no Protocol in stores/ declaring over 20 methods; no
module below app.py importing oncefire.app, and no lower layer (model, stores, engine,
features, operations) importing a shell (web, cli, audit, firebase, demo); no import cycle;
no module docstring of over 10 lines of prose; no `.conn` (a driver connection) reached
outside stores/; one SQL loader (stores/queries.py), no other module naming a .sql file.
"""

from __future__ import annotations

import ast
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
MAX_LINES = 400
MEDIAN_LINES = 150
NEAR_CAP = 395  # a module at 395-400 lines was likely cut to fit the cap: split it by concept
MAX_FOLDER_MODULES = 15
MAX_PROTOCOL_METHODS = 20
MAX_DOCSTRING_LINES = 10
LOWER = ("model", "stores", "engine", "features", "operations")
SHELLS = ("oncefire.web", "oncefire.cli", "oncefire.audit", "oncefire.firebase", "oncefire.demo")
_SQL = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|BEGIN|COMMIT|ROLLBACK|WITH|PRAGMA"
    r"|LISTEN|NOTIFY|LOCK|TRUNCATE|VACUUM|ANALYZE|EXPLAIN|SET LOCAL)\s+\S"
)
# The modules that sit above the App and may import it: the package's front door, the
# command line, the dashboard, the HTTP server, the supervisor, the test helpers, the loader
# of a user's app and the Firebase-style default App. A name ending in "/" is a package.
ABOVE_APP = (
    "oncefire/__init__.py",
    "oncefire/app.py",
    "oncefire/cli/",
    "oncefire/web/dashboard/",
    "oncefire/firebase/registration/apps.py",
    "oncefire/web/http_functions.py",
    "oncefire/web/requests.py",
    "oncefire/loader.py",
    "oncefire/web/server.py",
    "oncefire/processes/",
    "oncefire/testing.py",
)


def is_above_app(module: str) -> bool:
    """Whether a module (a path relative to src) sits above the App and may import it."""
    return any(
        module.startswith(name) if name.endswith("/") else module == name for name in ABOVE_APP
    )


@dataclass(frozen=True)
class SqlString:
    """A string literal of a Python module that starts like a SQL statement."""

    path: str
    line: int
    text: str


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
        ):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def sql_strings(path: Path) -> list[SqlString]:
    """String literals (f-strings too, by their first part) that start with a SQL keyword."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    skip |= {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    found = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
        elif isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                text = first.value
        if text is not None and _SQL.match(text):
            assert isinstance(node, ast.Constant | ast.JoinedStr)
            rel = str(path.relative_to(SRC)) if path.is_relative_to(SRC) else str(path)
            found.append(SqlString(rel, node.lineno, text.strip().splitlines()[0][:60]))
    return found


def module_sizes(root: Path = SRC) -> dict[str, int]:
    """Lines of each Python module under root, by path relative to src."""
    return {
        str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines())
        for p in sorted(root.rglob("*.py"))
    }


def imported_names(path: Path) -> set[str]:
    """Every dotted name a module imports, anywhere in it (TYPE_CHECKING and function-local
    imports too): `from a.b import c` gives a.b.c (a module, or a name of module a.b)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def app_importers(root: Path = SRC) -> list[str]:
    """Modules below app.py that import oncefire.app (TYPE_CHECKING imports count too), by
    path relative to root (src by default)."""
    return [
        str(path.relative_to(root))
        for path in sorted(root.rglob("*.py"))
        if not is_above_app(str(path.relative_to(root)))
        and any(n == "oncefire.app" or n.startswith("oncefire.app.") for n in imported_names(path))
    ]


def _module_name(rel: Path) -> str:
    parts = rel.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """Which modules under root each one imports (a name `from m import x` resolves to the
    module m.x if there is one, else to m)."""
    paths = {_module_name(p.relative_to(root)): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        targets = set()
        for name in imported_names(path):
            while name and name not in paths:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def import_cycles(root: Path = SRC) -> list[list[str]]:
    """The groups of modules that import each other, directly or not (Tarjan's strongly
    connected components of more than one module)."""
    graph = import_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while (member := stack.pop()) != module:
                group.append(member)
            if group:
                cycles.append(sorted([module, *group]))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def folder_sizes(root: Path = SRC) -> dict[str, int]:
    """Modules (not counting __init__.py) in each folder under root, by path relative to root."""
    counts: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        if path.name != "__init__.py":
            folder = str(path.parent.relative_to(root))
            counts[folder] = counts.get(folder, 0) + 1
    return counts


def protocol_sizes(root: Path = SRC / "oncefire" / "stores") -> dict[str, int]:
    """Methods each Protocol class under root declares itself (inherited ones not counted),
    by `path:Class`."""
    sizes: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                (isinstance(b, ast.Name) and b.id == "Protocol")
                or (isinstance(b, ast.Attribute) and b.attr == "Protocol")
                for b in node.bases
            ):
                methods = [
                    n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                ]
                sizes[f"{path.relative_to(root.parent.parent)}:{node.name}"] = len(methods)
    return sizes


def shell_importers(root: Path = SRC) -> list[str]:
    """Modules of the lower layers (the model, the stores, the engine, the features, the
    operations) that import a shell above them (the web parts, the CLI, the audit, the
    Firebase module, the demos): `module -> name`."""
    found = []
    for folder in LOWER:
        for path in sorted((root / "oncefire" / folder).rglob("*.py")):
            for name in sorted(imported_names(path)):
                if any(name == s or name.startswith(s + ".") for s in SHELLS):
                    found.append(f"{path.relative_to(root)} -> {name}")
    return found


def long_docstrings(root: Path = SRC) -> dict[str, int]:
    """Modules whose docstring runs over MAX_DOCSTRING_LINES lines of prose (a state table's
    rows, lines starting with `|` or indented, are not counted), by path relative to root."""
    long = {}
    for path in sorted(root.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=True) or ""
        prose = [
            line
            for line in doc.splitlines()
            if not line.lstrip().startswith("|") and not line.startswith((" ", "\t"))
        ]
        if len(prose) > MAX_DOCSTRING_LINES:
            long[str(path.relative_to(root))] = len(prose)
    return long


def _tree_report() -> bool:
    """Print the tree rules' findings; whether one is broken."""
    folders = {f: n for f, n in folder_sizes().items() if n > MAX_FOLDER_MODULES}
    near = {m: n for m, n in module_sizes().items() if NEAR_CAP <= n <= MAX_LINES}
    protocols = {c: n for c, n in protocol_sizes().items() if n > MAX_PROTOCOL_METHODS}
    shells = shell_importers()
    docs = long_docstrings()
    print(f"folders over {MAX_FOLDER_MODULES} modules: {len(folders)}")
    for folder, n in sorted(folders.items()):
        print(f"  {n:5d}  {folder}")
    print(f"modules at the cap ({NEAR_CAP}-{MAX_LINES} lines): {len(near)}")
    for module, n in sorted(near.items()):
        print(f"  {n:5d}  {module}")
    print(f"store protocols over {MAX_PROTOCOL_METHODS} methods: {len(protocols)}")
    for name, n in sorted(protocols.items()):
        print(f"  {n:5d}  {name}")
    print(f"lower layers importing a shell ({', '.join(SHELLS)}): {len(shells)}")
    for line in shells:
        print(f"  {line}")
    print(f"module docstrings over {MAX_DOCSTRING_LINES} lines: {len(docs)}")
    for module, n in sorted(docs.items()):
        print(f"  {n:5d}  {module}")
    return bool(folders or near or protocols or shells or docs)


STORES_PACKAGE = "oncefire/stores/"
SQL_LOADER = "oncefire/stores/queries.py"


def conn_accesses(root: Path = SRC) -> list[str]:
    """`path:line` of each `.conn` attribute read outside oncefire/stores/: a driver
    connection is the store's own, reached only through its statements."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = str(path.relative_to(root))
        if rel.startswith(STORES_PACKAGE):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "conn":
                found.append(f"{rel}:{node.lineno}")
    return found


def sql_readers(root: Path = SRC) -> list[str]:
    """Modules with a string literal (docstrings aside) that names a .sql file: the SQL
    loader, and any other module that reads .sql files itself."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        if any(
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skip
            and ".sql" in node.value
            for node in ast.walk(tree)
        ):
            found.append(str(path.relative_to(root)))
    return found


def main() -> int:
    """Print the report; 1 if a rule is broken: SQL in Python, a module over MAX_LINES, a
    median of MEDIAN_LINES or more, a module below app.py importing it, an import cycle, a
    `.conn` outside stores/, or a .sql file read outside the SQL loader."""
    sql = [s for p in sorted(SRC.rglob("*.py")) for s in sql_strings(p)]
    sizes = module_sizes()
    over = {m: n for m, n in sizes.items() if n > MAX_LINES}
    median = statistics.median(sizes.values())
    importers = app_importers()
    cycles = import_cycles()
    print(f"SQL statements in src/**/*.py: {len(sql)}")
    for s in sql:
        print(f"  {s.path}:{s.line}: {s.text}")
    print(f"modules: {len(sizes)}, median {median:g} lines (limit: under {MEDIAN_LINES})")
    for module, n in sorted(sizes.items(), key=lambda kv: -kv[1])[: max(10, len(over))]:
        print(f"  {n:5d}  {module}{'  OVER ' + str(MAX_LINES) if n > MAX_LINES else ''}")
    print(f"modules below app.py importing oncefire.app: {len(importers)}")
    for module in importers:
        print(f"  {module}")
    print(f"import cycles among the modules of src: {len(cycles)}")
    for group in cycles:
        print(f"  {' -> '.join(group)}")
    conns = conn_accesses()
    readers = sql_readers()
    print(f"driver connections (.conn) reached outside {STORES_PACKAGE}: {len(conns)}")
    for where in conns:
        print(f"  {where}")
    print(f"modules that read .sql files: {len(readers)} (only {SQL_LOADER} may)")
    for module in readers:
        print(f"  {module}")
    is_broken = _tree_report() or bool(sql or over or importers or cycles or conns)
    is_broken = is_broken or median >= MEDIAN_LINES
    is_broken = is_broken or readers != [SQL_LOADER]
    if is_broken:
        print("layout check failed: see the rules in tools/layout_check.py")
    return 1 if is_broken else 0


if __name__ == "__main__":
    sys.exit(main())
