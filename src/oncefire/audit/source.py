"""The source the static rules read: a registered function and the helpers it calls.

A function is followed to its definition (through decorators such as @idempotent), and
from there into the functions it calls by a plain name or `module.name`, when they are
defined under the same folder as the registered function: a few levels deep, each once.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

MAX_DEPTH = 3
EVENT_NAMES = frozenset({"event", "evt", "e"})
# Installed packages are not the app's code, even in a virtualenv inside the app's folder.
INSTALLED = frozenset({"site-packages", "dist-packages"})
FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True, slots=True)
class Scope:
    """One function body the rules read: where it is, its syntax tree and its globals."""

    file: str
    node: FunctionNode
    namespace: dict[str, Any]
    is_registered: bool = True  # False for a helper the registered function calls

    @property
    def shown_file(self) -> str:
        """The file as a finding names it: relative to the working folder when inside it."""
        relative = os.path.relpath(self.file)
        return self.file if relative.startswith("..") else relative

    @property
    def event_names(self) -> frozenset[str]:
        """Names that hold the event here: `event`, the registered function's first
        parameter, and a helper's parameters named or annotated as an event."""
        params = self.node.args.posonlyargs + self.node.args.args
        if self.is_registered:
            return frozenset(["event", *(a.arg for a in params[:1])])
        named = [
            a.arg
            for a in params
            if a.arg in EVENT_NAMES
            or (a.annotation is not None and ast.unparse(a.annotation).endswith("Event"))
        ]
        return frozenset(["event", *named])

    def calls(self) -> Iterator[ast.Call]:
        """Every call in the body, in source order."""
        found = [n for n in ast.walk(self.node) if isinstance(n, ast.Call)]
        yield from sorted(found, key=lambda n: (n.lineno, n.col_offset))


@functools.lru_cache(maxsize=256)
def parse(file: str) -> ast.Module:
    """The syntax tree of a source file (read once per audit process)."""
    return ast.parse(Path(file).read_text(encoding="utf-8"), filename=file)


def scope_of(fn: Callable[..., Any]) -> Scope | None:
    """The Scope of a plain Python function, or None when its source cannot be read."""
    fn = inspect.unwrap(fn)
    if not inspect.isfunction(fn):
        return None
    try:
        file = inspect.getsourcefile(fn)
        _, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    if file is None:
        return None
    try:
        tree = parse(file)
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, FunctionNode) and node.name == fn.__name__ and node.lineno >= start:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if first == start or node.lineno == start:
                return Scope(file, node, fn.__globals__)
    return None


def resolve(expr: ast.expr, namespace: dict[str, Any]) -> Any:
    """The object a name or dotted name refers to at import time, as far as it resolves,
    read without running any code of the objects on the way."""
    if isinstance(expr, ast.Name):
        return namespace.get(expr.id)
    if isinstance(expr, ast.Attribute):
        base = resolve(expr.value, namespace)
        if base is None:
            return None
        if isinstance(base, ModuleType):
            return getattr(base, expr.attr, None)
        try:  # never run a property: `app.db` would open the store
            return inspect.getattr_static(base, expr.attr)
        except AttributeError:
            return None
    if isinstance(expr, ast.Call):
        return resolve(expr.func, namespace)
    return None


def module_of(expr: ast.expr, namespace: dict[str, Any]) -> str | None:
    """The module a called name comes from: `requests.post` -> 'requests.api'."""
    while True:
        found = resolve(expr, namespace)
        if found is not None:
            if isinstance(found, ModuleType):
                return found.__name__
            module = getattr(found, "__module__", None)
            return module if isinstance(module, str) else None
        if isinstance(expr, ast.Attribute):
            expr = expr.value
        elif isinstance(expr, ast.Call):
            expr = expr.func
        else:
            return None


def is_app_code(file: str, folder: str) -> bool:
    """Whether a source file is the app's own: under its folder, not an installed package
    and not oncefire itself."""
    parts = Path(file).parts
    is_oncefire = Path(file).is_relative_to(Path(__file__).parents[1])
    return file.startswith(folder + os.sep) and not INSTALLED & set(parts) and not is_oncefire


def scopes_of(fn: Callable[..., Any]) -> list[Scope]:
    """The registered function's Scope first, then the helpers it calls, breadth first."""
    root = scope_of(fn)
    if root is None:
        return []
    folder = str(Path(root.file).parent)
    scopes, seen = [root], {(root.file, root.node.lineno)}
    frontier = [root]
    for _ in range(MAX_DEPTH):
        following: list[Scope] = []
        for scope in frontier:
            for call in scope.calls():
                target = resolve(call.func, scope.namespace)
                helper = scope_of(target) if callable(target) else None
                if helper is None or (helper.file, helper.node.lineno) in seen:
                    continue
                if not is_app_code(helper.file, folder):
                    continue
                seen.add((helper.file, helper.node.lineno))
                following.append(replace(helper, is_registered=False))
        scopes.extend(following)
        frontier = following
    return scopes
