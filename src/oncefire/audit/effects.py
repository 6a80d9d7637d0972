"""What a function body does, read from its syntax: store writes, calls to the outside
world, the paths it writes, and whether an expression is derived from the event's id."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from oncefire.audit.source import Scope, module_of, resolve

# Modules (and their submodules) whose calls leave the process.
OUTSIDE_MODULES = (
    "requests",
    "httpx",
    "urllib.request",
    "http.client",
    "aiohttp",
    "smtplib",
    "boto3",
    "botocore",
    "stripe",
    "twilio",
    "sendgrid",
    "socket",
)
WRITE_VERBS = frozenset({"set", "update", "delete", "create", "add"})
PLACEHOLDER = "\x00"


@dataclass(frozen=True, slots=True)
class Write:
    """A store write: its verb, the call, and the written path (placeholders as NUL), if known.
    `is_own` means the document that triggered the function (`event.data.after.reference`)."""

    verb: str
    call: ast.Call
    path: str | None
    is_own: bool = False
    is_keyed_by_event: bool = False  # the path holds event.id
    is_from_event: bool = False  # the path holds something of the event (params, data, id)


def attr_of(call: ast.Call) -> str | None:
    """The called method or function name: `a.b.set(...)` -> 'set'."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def mentions_event(
    expr: ast.AST, scope: Scope, assigned: dict[str, ast.expr] | None = None, depth: int = 3
) -> bool:
    """Whether the expression reads the event (its params, data or id), directly or through
    names assigned in the same function (`order_id = event.params["orderId"]`)."""
    for node in ast.walk(expr):
        if not isinstance(node, ast.Name):
            continue
        if node.id in scope.event_names:
            return True
        value = (assigned or {}).get(node.id)
        if value is not None and depth > 0 and mentions_event(value, scope, assigned, depth - 1):
            return True
    return False


def mentions_event_id(expr: ast.AST, scope: Scope) -> bool:
    """Whether the expression holds the event's id (`event.id`, a name `event_id`)."""
    for node in ast.walk(expr):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "id"
            and isinstance(node.value, ast.Name)
            and node.value.id in scope.event_names
        ):
            return True
        if isinstance(node, ast.Name) and node.id == "event_id":
            return True
    return False


def passes_key(call: ast.Call, scope: Scope) -> bool:
    """Whether a call passes an idempotency key: event.id, or a name holding a key (a name
    assigned in the same function is read through: `request = Request(..., event.id)`)."""
    if any(k.arg and "idempotency" in k.arg.lower() for k in call.keywords):
        return True
    assigned, _ = bindings(scope)
    values = [*call.args, *(k.value for k in call.keywords)]
    values += [assigned[v.id] for v in values if isinstance(v, ast.Name) and v.id in assigned]
    for value in values:
        if mentions_event_id(value, scope):
            return True
        if any(isinstance(n, ast.Name) and "key" in n.id.lower() for n in ast.walk(value)):
            return True
    return False


def outside_calls(scope: Scope, modules: tuple[str, ...]) -> Iterator[ast.Call]:
    """Calls into a module that reaches outside the process (HTTP, mail, cloud SDKs)."""
    for call in scope.calls():
        if isinstance(resolve(call.func, scope.namespace), type):
            continue  # building a request or a client object sends nothing yet
        module = module_of(call.func, scope.namespace)
        if module and any(module == m or module.startswith(m + ".") for m in modules):
            yield call


def bindings(scope: Scope) -> tuple[dict[str, ast.expr], set[str]]:
    """Names assigned once from an expression, and names that hold a transaction."""
    assigned: dict[str, ast.expr] = {}
    transactions = {"tx", "transaction"}
    for node in ast.walk(scope.node):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                assigned[target.id] = node.value
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                call = item.context_expr
                is_tx = isinstance(call, ast.Call) and attr_of(call) == "transaction"
                if is_tx and isinstance(item.optional_vars, ast.Name):
                    transactions.add(item.optional_vars.id)
    return assigned, transactions


def literal(expr: ast.expr) -> str | None:
    """A string constant or f-string, each placeholder as NUL; None for anything else."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.JoinedStr):
        parts = [literal(v) if isinstance(v, ast.Constant) else PLACEHOLDER for v in expr.values]
        return "".join(p or "" for p in parts)
    return None


def target_path(expr: ast.expr, assigned: dict[str, ast.expr]) -> tuple[str | None, bool]:
    """(path, is_own) of a document or collection reference expression."""
    if isinstance(expr, ast.Name) and expr.id in assigned:
        expr = assigned[expr.id]
    if isinstance(expr, ast.Attribute) and expr.attr == "reference":
        return None, True
    if not isinstance(expr, ast.Call) or attr_of(expr) not in ("document", "collection"):
        return None, False
    # A computed id is one unknown segment; no argument: add() or document() make a new id.
    own = (literal(expr.args[0]) or PLACEHOLDER) if expr.args else PLACEHOLDER
    receiver = expr.func.value if isinstance(expr.func, ast.Attribute) else None
    if isinstance(receiver, ast.Call) and attr_of(receiver) == "collection":
        parent, _ = target_path(receiver, assigned)
        return (None if parent is None else f"{parent}/{own}"), False
    return own, False


def writes(scope: Scope) -> Iterator[Write]:
    """Every store write in the body: `ref.set(...)`, `tx.update(ref, ...)`, `col.add(...)`."""
    assigned, transactions = bindings(scope)
    for call in scope.calls():
        verb = attr_of(call)
        if verb not in WRITE_VERBS or not isinstance(call.func, ast.Attribute):
            continue
        receiver = call.func.value
        if isinstance(receiver, ast.Name) and receiver.id in transactions:
            if not call.args or verb == "add":
                continue
            target = call.args[0]
        else:
            target = receiver
        resolved = assigned.get(target.id, target) if isinstance(target, ast.Name) else target
        path, is_own = target_path(target, assigned)
        if path is None and not is_own:
            continue
        if verb == "add":
            path = None if path is None else f"{path}/{PLACEHOLDER}"
        yield Write(
            verb,
            call,
            path,
            is_own,
            mentions_event_id(resolved, scope),
            is_own or mentions_event(resolved, scope, assigned),
        )
