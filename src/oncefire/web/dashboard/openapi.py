"""The OpenAPI 3 document of the dashboard's JSON API, served at /api/openapi.json."""

from __future__ import annotations

from typing import Any

NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}}
EVENT_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
ERROR = {
    "name": "error",
    "in": "query",
    "description": "Errors containing this text, searched in the newest 10,000 dead letters "
    "(older than `before`); count_is_lower_bound says older ones were not read.",
    "schema": {"type": "string"},
}
GROUP = {
    "name": "group",
    "in": "query",
    "description": "Only this error group (an error's first line, as `groups` lists them).",
    "schema": {"type": "string"},
}
CSRF = {"name": "X-CSRF-Token", "in": "header", "schema": {"type": "string"}}
OUTCOMES = ["succeeded", "failed", "timeout", "crashed", "expired", "permanent"]


def limit(high: int) -> dict[str, Any]:
    """A `limit` query parameter up to high."""
    return {
        "name": "limit",
        "in": "query",
        "schema": {"type": "integer", "minimum": 1, "maximum": high},
    }


def answer(schema: dict[str, Any], *errors: int) -> dict[str, Any]:
    """The responses of an operation: 200 with schema, and its error statuses."""
    out: dict[str, Any] = {"200": {"description": "OK", "content": content(schema)}}
    for status in (400, 401, 403, *errors):
        out[str(status)] = {"description": "Error", "content": content(ref("Error"))}
    return out


def content(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON content entry."""
    return {"application/json": {"schema": schema}}


def ref(name: str) -> dict[str, Any]:
    """A reference to a component schema."""
    return {"$ref": f"#/components/schemas/{name}"}


def array(name: str) -> dict[str, Any]:
    """An array of a component schema."""
    return {"type": "array", "items": ref(name)}


def get(summary: str, params: list[dict[str, Any]], schema: dict[str, Any], *errors: int) -> Any:
    """A GET operation."""
    return {"get": {"summary": summary, "parameters": params, "responses": answer(schema, *errors)}}


def post(summary: str, params: list[dict[str, Any]], body: dict[str, Any] | None) -> Any:
    """A POST operation answering a count."""
    op: dict[str, Any] = {
        "summary": summary,
        "parameters": [
            *params,
            {"name": "X-CSRF-Token", "in": "header", "schema": {"type": "string"}},
        ],
        "responses": answer({"type": "object"}, 404),
    }
    if body is not None:
        op["requestBody"] = {"required": False, "content": content(body)}
    return {"post": op}


NUMBER = {"type": ["number", "null"]}
SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]},
    "Function": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "kind": {"type": "string"},
            "source": {"type": "string"},
            "options": {"type": ["object", "null"]},
            "succeeded": {"type": "integer"},
            "failed": {"type": "integer"},
            "success_rate": NUMBER,
            "colour": {"type": "string", "enum": ["green", "amber", "red", "none"]},
            "dead_letters": {"type": "integer"},
            "pending": {"type": "integer"},
            "oldest_pending_age": NUMBER,
            "p50_duration": NUMBER,
            "p95_duration": NUMBER,
            "dedupe_hits": {"type": "integer"},
            "paused": {"type": "boolean"},
            "paused_reason": {"type": ["string", "null"]},
            "last_seen": NUMBER,
            "unserved": {"type": ["string", "null"]},
        },
        "required": ["name", "kind", "source", "success_rate", "dead_letters", "pending"],
    },
    "DeadLetter": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "function": {"type": "string"},
            "event_id": {"type": "string"},
            "event_type": {"type": "string"},
            "source": {"type": "string"},
            "attempts": {"type": "integer"},
            "error": {"type": ["string", "null"]},
            "failed_at": {"type": "string"},
            "payload": {},
            "truncated": {"type": "boolean"},
        },
        "required": ["id", "function", "event_id", "attempts", "failed_at"],
    },
    "Attempt": {"type": "object", "properties": {"outcome": {"type": ["string", "null"]}}},
    "Event": {
        "type": "object",
        "properties": {"id": {"type": "string"}, "deliveries": {"type": "array"}},
        "required": ["id", "deliveries"],
    },
    "AuditEntry": {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "actor": {"type": "string"}},
        "required": ["id", "actor", "action", "count"],
    },
}
FILTER = {
    "type": "object",
    "properties": {
        "error_contains": {"type": ["string", "null"]},
        "error_group": {"type": ["string", "null"]},
    },
}
COUNT = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "count_is_lower_bound": {"type": "boolean"},
    },
    "required": ["count", "count_is_lower_bound"],
}
DEAD_LETTERS = {
    "type": "object",
    "properties": {
        "total": {"type": "integer"},
        "count": {"type": "integer"},
        "count_is_lower_bound": {"type": "boolean"},
        "searched": {"type": ["integer", "null"]},
        "next_before": {"type": ["integer", "null"]},
        "items": array("DeadLetter"),
        "groups": {"type": "array"},
    },
    "required": ["total", "count", "count_is_lower_bound", "items", "groups"],
}
EDIT = {"type": "object", "properties": {"payload": {"type": "object"}}, "required": ["payload"]}


def document() -> dict[str, Any]:
    """The OpenAPI document."""
    fn = "/api/functions/{name}"
    outcome = {"name": "outcome", "in": "query", "schema": {"type": "string", "enum": OUTCOMES}}
    before = {"name": "before", "in": "query", "schema": {"type": "integer", "minimum": 1}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "oncefire dashboard API", "version": "1"},
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
        "paths": {
            "/api/functions": get(
                "Every function", [], {"type": "array", "items": ref("Function")}
            ),
            fn: get("One function with its failures per hour", [NAME], ref("Function"), 404),
            f"{fn}/dead-letters": get(
                "A function's dead letters, their count and groups",
                [NAME, ERROR, GROUP, before, limit(1000)],
                DEAD_LETTERS,
                404,
            ),
            f"{fn}/dead-letters/count": get(
                "How many dead letters", [NAME, ERROR, GROUP], COUNT, 404
            ),
            f"{fn}/dead-letters/replay-all": post("Replay a group or filter", [NAME], FILTER),
            f"{fn}/dead-letters/dismiss-all": post("Dismiss a group or filter", [NAME], FILTER),
            f"{fn}/executions": get(
                "Recent attempts",
                [NAME, outcome, limit(500)],
                {"type": "array", "items": ref("Attempt")},
                404,
            ),
            f"{fn}/pause": post(
                "Pause a function: its deliveries stay pending, nothing of it runs", [NAME], None
            ),
            f"{fn}/resume": post("Resume a paused function where it stopped", [NAME], None),
            "/api/unrouted": get(
                "Events that matched no function: count, those of a source a function used "
                "to take (or keep_unrouted names), by origin; kept, all of them",
                [],
                {
                    "type": "object",
                    "properties": {
                        "count": {"type": "integer"},
                        "kept": {"type": "integer"},
                        "origins": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "origin": {"type": "string"},
                                    "events": {"type": "integer"},
                                },
                            },
                        },
                    },
                },
            ),
            "/api/dead-letters/{id}": get("One dead letter", [ID], ref("DeadLetter"), 404),
            "/api/dead-letters/{id}/replay": post("Replay", [ID], None),
            "/api/dead-letters/{id}/dismiss": post("Dismiss", [ID], None),
            "/api/dead-letters/{id}/replay-edited": post("Replay an edited payload", [ID], EDIT),
            "/api/events/{id}": get("One event and its attempts", [EVENT_ID], ref("Event"), 404),
            "/api/audit": get(
                "The audit trail",
                [limit(500), before],
                {"type": "array", "items": ref("AuditEntry")},
            ),
        },
    }
