"""Secrets hidden from people: one `redact()` used by the pages, the API and the CLI."""

from __future__ import annotations

import re
from typing import Any

SECRET_KEY = re.compile(r"password|token|secret|authorization|api_key|cookie", re.IGNORECASE)
REDACTED = "[redacted]"


def redact(value: Any) -> Any:
    """A copy of value in which every entry whose key names a secret reads "[redacted]"."""
    if isinstance(value, dict):
        return {k: REDACTED if SECRET_KEY.search(str(k)) else redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def restore(edited: Any, original: Any) -> Any:
    """An edit of a redacted value with each entry still reading "[redacted]" given back its
    original value, so editing a payload on a page never writes the placeholder."""
    if isinstance(edited, dict) and isinstance(original, dict):
        out = {}
        for key, value in edited.items():
            if value == REDACTED and SECRET_KEY.search(str(key)) and key in original:
                out[key] = original[key]
            else:
                out[key] = restore(value, original.get(key))
        return out
    if isinstance(edited, list) and isinstance(original, list):
        return [
            restore(v, original[i] if i < len(original) else None) for i, v in enumerate(edited)
        ]
    return edited
