"""The static rules: read each registered function's source (and its helpers) with `ast`."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from oncefire.audit.effects import (
    OUTSIDE_MODULES,
    PLACEHOLDER,
    Write,
    attr_of,
    literal,
    outside_calls,
    passes_key,
    writes,
)
from oncefire.audit.findings import Finding
from oncefire.audit.source import Scope, scopes_of
from oncefire.model.trigger_kind import TriggerKind
from oncefire.triggers import Trigger

BROAD = frozenset({"Exception", "BaseException"})
CLASSIFIERS = frozenset({"PermanentError", "Retry"})
# The document events a write can cause, by verb; a set on the triggering document updates it.
CAUSES = {
    "set": ("document.created", "document.updated"),
    "update": ("document.updated",),
    "create": ("document.created",),
    "add": ("document.created",),
    "delete": ("document.deleted",),
}


def audit_trigger(trigger: Trigger, modules: tuple[str, ...] = OUTSIDE_MODULES) -> list[Finding]:
    """The static findings of one registered function."""
    scopes = scopes_of(trigger.fn)
    if not scopes:
        return []
    root = scopes[0]

    def finding(rule: str, scope: Scope, line: int, message: str) -> Finding:
        return Finding(rule, trigger.name, message, scope.shown_file, line)

    found: list[Finding] = []
    all_writes = [(s, w) for s in scopes for w in writes(s)]
    outside = [(s, c) for s in scopes for c in outside_calls(s, modules)]
    is_retried = trigger.options.retry and trigger.kind.is_run_by_workers
    is_idempotent = hasattr(trigger.fn, "__oncefire_idempotent__")
    # What a retry would do again: a store write, a call outside, a publish. A function with
    # none (it prints, logs or only reads) has nothing to guard.
    repeated = [(s, w.call) for s, w in all_writes] + outside + list(publishes(scopes))
    if is_retried and repeated and not (is_idempotent or has_decision(trigger, scopes, all_writes)):
        scope, call = min(repeated, key=lambda e: (e[0] is not root, e[1].lineno))
        where = f"line {call.lineno}"
        if scope.file != root.file:
            where = f"{scope.shown_file}:{call.lineno}"
        found.append(
            finding(
                "retry-without-guard",
                root,
                root.node.lineno,
                "retries on failure but makes no decision about duplicate deliveries: "
                f"{ast.unparse(call.func)}() ({where}) runs again",
            )
        )
    for scope, line, what in increments(scopes):
        found.append(
            finding("increment-in-trigger", scope, line, f"{what} without tx.claim(event.id)")
        )
    for scope, write in all_writes:
        if is_self_write(trigger, write):
            path = (write.path or "").replace(PLACEHOLDER, "{…}")
            shown = "its own document" if write.is_own else repr(path)
            found.append(
                finding(
                    "self-trigger",
                    scope,
                    write.call.lineno,
                    f"{write.verb}() on {shown} matches its own trigger {trigger.source!r}",
                )
            )
    for scope, call in self_publishes(trigger, scopes):
        found.append(
            finding(
                "self-trigger",
                scope,
                call.lineno,
                f"publishes on {trigger.source!r}, the topic that starts it",
            )
        )
    effects = [(s, w.call) for s, w in all_writes] + outside
    if trigger.options.max_instances is None and effects:
        scope, call = min(effects, key=lambda e: (e[0] is not root, e[1].lineno))
        found.append(
            finding(
                "no-max-instances",
                root,
                root.node.lineno,
                f"writes or calls outside ({scope.shown_file}:{call.lineno}) with no cap on "
                "concurrent instances",
            )
        )
    if is_retried and not is_idempotent:
        for scope, call in outside:
            if not passes_key(call, scope):
                name = ast.unparse(call.func)
                found.append(
                    finding(
                        "external-call-without-key",
                        scope,
                        call.lineno,
                        f"{name}() may run again on a retry and passes no key from event.id",
                    )
                )
    names = {kind.__name__ for kind in trigger.options.permanent_errors} | CLASSIFIERS
    for scope in scopes:
        for handler, how in broad_handlers(scope, names):
            found.append(finding("broad-except", scope, handler.lineno, how))
    return found


def has_decision(trigger: Trigger, scopes: list[Scope], found: list[tuple[Scope, Write]]) -> bool:
    """Whether the function decides about duplicates: a claim, a permanent-error
    classification, or a write to a document named after the event."""
    if trigger.options.permanent_errors:
        return True
    for scope in scopes:
        for node in ast.walk(scope.node):
            if isinstance(node, ast.Call) and attr_of(node) == "claim":
                return True
            if isinstance(node, ast.Name | ast.Attribute) and name_of(node) == "PermanentError":
                return True
    # A write the event fully determines (a document named after the event) comes out the
    # same however often it runs; add() makes a new document each time.
    return any(w.is_keyed_by_event or (w.is_from_event and w.verb != "add") for _, w in found)


def name_of(node: ast.AST) -> str | None:
    """The last name of a name or dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def increments(scopes: list[Scope]) -> Iterator[tuple[Scope, int, str]]:
    """(scope, line, what) of each Increment or read-modify-write of a number that no
    tx.claim in the same transaction guards."""
    for scope in scopes:
        guarded: set[int] = set()
        for node in ast.walk(scope.node):
            if isinstance(node, ast.With | ast.AsyncWith) and any(
                isinstance(i.context_expr, ast.Call) and attr_of(i.context_expr) == "transaction"
                for i in node.items
            ):
                inside = list(ast.walk(node))
                if any(isinstance(n, ast.Call) and attr_of(n) == "claim" for n in inside):
                    guarded.update(id(n) for n in inside)
        for call in scope.calls():
            if id(call) in guarded:
                continue
            if name_of(call.func) == "Increment":
                yield scope, call.lineno, "Increment() in a trigger"
            elif attr_of(call) in ("set", "update") and any(
                is_read_modify_write(node) for arg in call.args for node in ast.walk(arg)
            ):
                yield scope, call.lineno, "a read-modify-write of a number in a trigger"


def is_read_modify_write(node: ast.AST) -> bool:
    """`snap.get("n") + 1` or `data["n"] - 1`: a number read then written back."""
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, ast.Add | ast.Sub):
        return False
    sides = (node.left, node.right)
    is_read = any(
        isinstance(s, ast.Subscript) or (isinstance(s, ast.Call) and attr_of(s) == "get")
        for s in sides
    )
    is_number = any(isinstance(s, ast.Constant) and isinstance(s.value, int) for s in sides)
    return is_read and is_number


def is_self_write(trigger: Trigger, write: Write) -> bool:
    """Whether a write can cause an event that starts the same function again."""
    if trigger.kind is not TriggerKind.DOCUMENT or trigger.pattern is None:
        return False
    causes = set(CAUSES[write.verb])
    if write.is_own or (write.verb == "set" and write.is_from_event):
        causes.discard("document.created")  # the triggering document exists already
    if not causes & set(trigger.event_types):
        return False
    if write.is_own:
        return True
    path = (write.path or "").replace(PLACEHOLDER, "x")
    return bool(path) and trigger.pattern.match(path.strip("/")) is not None


def publishes(scopes: list[Scope]) -> Iterator[tuple[Scope, ast.Call]]:
    """`publish(topic, ...)` calls (`app.publish`, `tx.publish`), on any topic."""
    for scope in scopes:
        for call in scope.calls():
            if attr_of(call) == "publish" and bool(call.args or call.keywords):
                yield scope, call


def self_publishes(trigger: Trigger, scopes: list[Scope]) -> Iterator[tuple[Scope, ast.Call]]:
    """`publish(topic, ...)` calls on the topic that starts the function."""
    if trigger.kind is not TriggerKind.MESSAGE:
        return
    for scope, call in publishes(scopes):
        if call.args and literal(call.args[0]) == trigger.source:
            yield scope, call


def broad_handlers(scope: Scope, classifiers: set[str]) -> Iterator[tuple[ast.ExceptHandler, str]]:
    """`except Exception` (or bare) handlers that swallow the error or re-raise it without
    telling permanent errors from transient ones."""
    for node in ast.walk(scope.node):
        if not isinstance(node, ast.Try):
            continue
        is_specific_before = False
        for handler in node.handlers:
            caught = handler.type
            names = (
                {name_of(e) for e in caught.elts}
                if isinstance(caught, ast.Tuple)
                else {name_of(caught)}
                if caught is not None
                else {"Exception"}
            )
            if not names & BROAD:
                is_specific_before = True
                continue
            body = [n for stmt in handler.body for n in ast.walk(stmt)]
            if not any(isinstance(n, ast.Raise) for n in body):
                yield handler, "catches every exception and swallows it: the delivery succeeds"
                continue
            is_classified = is_specific_before or any(
                (isinstance(n, ast.Name) and n.id in classifiers)
                or (isinstance(n, ast.Call) and name_of(n.func) == "isinstance")
                for n in body
            )
            if not is_classified:
                yield handler, "catches every exception and re-raises it without classifying"
