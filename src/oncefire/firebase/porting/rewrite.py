"""`oncefire port`: a Firebase main.py's imports rewritten for oncefire, and what it uses that
oncefire does not offer, by line.

`firebase_functions` and `firebase_admin` become `oncefire.firebase`; `google.cloud.firestore`
and `google.cloud.firestore_v1...` become `oncefire.firebase.firestore`, in imports and in
dotted uses. Every name imported from those, and every attribute used on an imported module,
is looked up in oncefire.firebase as installed: one that is missing is listed with a reason
and what to do. Nothing else in the file changes.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from oncefire.errors import ConfigError

TARGET = "oncefire.firebase"
FIRESTORE = "oncefire.firebase.firestore"
GOOGLE_SIDE = "a Google-side service with nothing to run here: keep this function on Firebase"
REASONS = {
    "identity_fn": "no user directory: keep on Firebase Auth or call it over HTTP",
    "auth": "no user directory: keep users on Firebase Auth; check their ID tokens with "
    "oncefire.firebase.set_auth_verifier",
    "alerts_fn": f"Firebase Alerts is {GOOGLE_SIDE}",
    "alerts": f"Firebase Alerts is {GOOGLE_SIDE}",
    "remote_config_fn": f"Remote Config is {GOOGLE_SIDE}",
    "remote_config": f"Remote Config is {GOOGLE_SIDE}",
    "test_lab_fn": f"Test Lab is {GOOGLE_SIDE}",
    "messaging": "Cloud Messaging is a Google-side service: send from your own code through "
    "FCM's HTTP v1 API",
    "dataconnect_fn": f"Data Connect is {GOOGLE_SIDE}",
    "app_check": "App Check tokens are verified by Google: keep App Check on Firebase",
    "instance_id": GOOGLE_SIDE,
    "project_management": GOOGLE_SIDE,
    "ml": GOOGLE_SIDE,
    "tenant_mgt": "no user directory: keep tenants on Firebase Auth",
}
DEFAULT_REASON = (
    "oncefire.firebase has no such name: keep it on Firebase or replace it (docs/firebase.md)"
)


@dataclass(frozen=True, slots=True)
class Missing:
    """A name the module uses that oncefire does not offer, and where."""

    line: int
    name: str
    reason: str

    def to_line(self, filename: str) -> str:
        """One line: file:line: name, reason and what to do."""
        return f"{filename}:{self.line}: {self.name} is not offered: {self.reason}."


@dataclass(frozen=True, slots=True)
class Ported:
    """The rewritten text, how many places changed, and what is not offered."""

    text: str
    rewritten: int
    missing: tuple[Missing, ...]


def new_module(module: str) -> str | None:
    """oncefire's module for a Firebase one, or None when module is not Firebase's."""
    for old, new in (("firebase_functions", TARGET), ("firebase_admin", TARGET)):
        if module == old or module.startswith(old + "."):
            return new + module[len(old) :]
    if re.fullmatch(r"google\.cloud\.firestore(_v1)?(\.\w+)*", module):
        return FIRESTORE
    return None


def port(source: str, filename: str = "main.py") -> Ported:
    """The ported text of a Firebase module; ConfigError when it is not valid Python."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        where = f"{filename}, line {exc.lineno}"
        raise ConfigError(f"Cannot port {where}: SyntaxError: {exc.msg}.") from None
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int, int, str]] = []
    finder = _Finder()
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            finder.parents[child] = parent
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            _port_from(node, lines, edits, finder)
        elif isinstance(node, ast.Import):
            _port_import(node, lines, edits, finder)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            _port_use(node, lines, edits, finder)
    text = _apply(lines, edits)
    missing = sorted(finder.missing.values(), key=lambda m: (m.line, m.name))
    return Ported(text, len(edits), tuple(missing))


class _Finder:
    """Looks names up in oncefire.firebase and keeps the first use of each missing one."""

    def __init__(self) -> None:
        self.missing: dict[str, Missing] = {}
        self.modules: dict[str, str] = {}  # a name bound in the file -> the module it is
        self.parents: dict[ast.AST, ast.AST] = {}

    def note(self, line: int, name: str) -> None:
        short = name.rsplit(".", 1)[-1]
        reason = REASONS.get(short, DEFAULT_REASON)
        self.missing.setdefault(name, Missing(line, name, reason))

    def module(self, dotted: str) -> ModuleType | None:
        try:
            if importlib.util.find_spec(dotted) is None:
                return None
        except ModuleNotFoundError:
            return None
        return importlib.import_module(dotted)

    def check_module(self, line: int, dotted: str, shown: str) -> ModuleType | None:
        """The module, or None after noting the first part of it that is missing."""
        found = self.module(dotted)
        if found is None:
            parts = dotted.split(".")
            for end in range(3, len(parts) + 1):
                if self.module(".".join(parts[:end])) is None:
                    self.note(line, parts[end - 1] if end > 2 else shown)
                    break
        return found

    def check_name(self, line: int, module: str, name: str) -> Any:
        """What `from module import name` gives, or None after noting it missing."""
        if self.module(f"{module}.{name}") is not None:
            return importlib.import_module(f"{module}.{name}")
        found = self.check_module(line, module, module)
        if found is None:
            return None
        if not hasattr(found, name):
            self.note(line, name if module == TARGET else f"{module.rsplit('.', 1)[-1]}.{name}")
            return None
        return getattr(found, name)


def _port_from(node: ast.ImportFrom, lines: list[str], edits: list[Any], finder: _Finder) -> None:
    module = str(node.module)
    names = [alias.name for alias in node.names]
    if module == "google.cloud" and "firestore" in names:
        if names != ["firestore"]:
            finder.note(node.lineno, "google.cloud import")
            return
        target = TARGET
    else:
        found = new_module(module)
        if found is None:
            return
        target = found
    start = _char(lines, node.lineno, node.col_offset)
    match = re.compile(r"from\s+(" + re.escape(module) + r")\b").match(
        lines[node.lineno - 1], start
    )
    if match is None:
        raise ConfigError(f"Cannot port line {node.lineno}: write it as `from {module} import`.")
    edits.append((node.lineno, match.start(1), node.lineno, match.end(1), target))
    for alias in node.names:
        if alias.name == "*":
            continue
        value = finder.check_name(node.lineno, target, alias.name)
        if isinstance(value, ModuleType):
            finder.modules[alias.asname or alias.name] = value.__name__


def _port_import(node: ast.Import, lines: list[str], edits: list[Any], finder: _Finder) -> None:
    parts, changed = [], False
    for alias in node.names:
        target = new_module(alias.name)
        if target is None:
            parts.append(alias.name + (f" as {alias.asname}" if alias.asname else ""))
            continue
        changed = True
        if alias.asname:
            parts.append(f"{target} as {alias.asname}")
            bound = alias.asname
        elif target == FIRESTORE:  # `import google.cloud.firestore`: uses are rewritten
            parts.append(target)
            bound = ""
        else:  # `import firebase_admin[.x]` binds firebase_admin: keep that name
            root = alias.name.split(".")[0]
            parts.append(f"{TARGET} as {root}")
            bound, target = root, TARGET
        if finder.check_module(node.lineno, target, alias.name) is not None and bound:
            finder.modules[bound] = target
    if changed:
        end_col = _char(lines, node.end_lineno or node.lineno, node.end_col_offset or 0)
        start = _char(lines, node.lineno, node.col_offset)
        edits.append((node.lineno, start, node.end_lineno, end_col, "import " + ", ".join(parts)))


def _port_use(node: ast.Attribute, lines: list[str], edits: list[Any], finder: _Finder) -> None:
    dotted = _dotted(node)
    if dotted is None:
        return
    head, _, rest = dotted.partition(".")
    if head in finder.modules and rest and "." not in rest:
        module = importlib.import_module(finder.modules[head])
        if not hasattr(module, rest) and finder.module(f"{module.__name__}.{rest}") is None:
            finder.note(node.lineno, f"{head}.{rest}")
    if dotted.count(".") == 2 and new_module(dotted) == FIRESTORE:
        _port_google_use(node, dotted, lines, edits, finder)


def _port_google_use(
    node: ast.Attribute, dotted: str, lines: list[str], edits: list[Any], finder: _Finder
) -> None:
    """`google.cloud.firestore[_v1][.submodule...].Name` -> `oncefire.firebase.firestore.Name`
    (node is the `google.cloud.firestore` part)."""
    stand_in = importlib.import_module(FIRESTORE)
    outer: ast.Attribute = node
    parents = finder.parents
    while isinstance(parent := parents.get(outer), ast.Attribute):
        if hasattr(stand_in, parent.attr) or not re.fullmatch(r"[a-z][a-z0-9_]*", parent.attr):
            break
        outer = parent  # a submodule of the Python client: dropped
    start = _char(lines, node.lineno, node.col_offset)
    end = _char(lines, outer.end_lineno or node.lineno, outer.end_col_offset or 0)
    edits.append((node.lineno, start, outer.end_lineno, end, FIRESTORE))
    used = parents.get(outer)
    if isinstance(used, ast.Attribute) and not hasattr(stand_in, used.attr):
        finder.note(node.lineno, f"firestore.{used.attr}")


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _char(lines: list[str], lineno: int, byte_col: int) -> int:
    """The character column of ast's byte column."""
    return len(lines[lineno - 1].encode("utf-8")[:byte_col].decode("utf-8", "replace"))


def _apply(lines: list[str], edits: list[tuple[int, int, int, int, str]]) -> str:
    out = list(lines)
    for line, start, end_line, end, text in sorted(set(edits), reverse=True):
        first, last = out[line - 1], out[end_line - 1]
        out[line - 1 : end_line] = [first[:start] + text + last[end:]]
    return "".join(out)
