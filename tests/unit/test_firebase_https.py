"""oncefire.firebase.https_fn: the Flask-style request over a read request, and Response."""

from __future__ import annotations

from typing import Any

import pytest

from oncefire.errors import PermanentError
from oncefire.firebase import https_fn
from oncefire.http import Request


def request(body: bytes = b"", content_type: str | None = None, query: str = "") -> Any:
    headers = [(b"host", b"example.test")]
    if content_type is not None:
        headers.append((b"content-type", content_type.encode()))
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/addmessage",
        "raw_path": b"/addmessage",
        "query_string": query.encode(),
        "headers": headers,
        "scheme": "http",
        "server": ("example.test", 80),
        "client": ("10.0.0.7", 5000),
    }
    return https_fn.Request(Request(scope, body))


def test_args_headers_method_path_and_data() -> None:
    req = request(b"raw", "text/plain", "text=hi&tag=a&tag=b")
    assert (req.method, req.path, req.data, req.get_data(as_text=True)) == (
        "POST",
        "/addmessage",
        b"raw",
        "raw",
    )
    assert req.args.get("text") == "hi" and req.args.getlist("tag") == ["a", "b"]
    assert req.args.get("missing") is None
    assert req.headers.get("Content-Type") == "text/plain"
    assert req.remote_addr == "10.0.0.7"
    assert req.url == "http://example.test/addmessage?text=hi&tag=a&tag=b"


def test_get_json_reads_declared_json_and_refuses_the_rest_as_flask_does() -> None:
    assert request(b'{"a": 1}', "application/json").get_json() == {"a": 1}
    assert request(b'{"a": 1}', "application/vnd.api+json").json == {"a": 1}
    undeclared = request(b'{"a": 1}', "text/plain")
    assert undeclared.get_json(silent=True) is None
    assert undeclared.get_json(force=True) == {"a": 1}
    with pytest.raises(PermanentError, match="not application/json"):
        undeclared.get_json()
    broken = request(b"{nope", "application/json")
    assert broken.get_json(silent=True) is None
    with pytest.raises(PermanentError, match="not valid JSON"):
        broken.get_json()


def test_form_reads_a_url_encoded_body() -> None:
    form = request(b"name=Ada&empty=", "application/x-www-form-urlencoded").form
    assert (form.get("name"), form.get("empty")) == ("Ada", "")
    assert request(b"name=Ada", "text/plain").form.get("name") is None


def test_response_takes_flask_arguments() -> None:
    response = https_fn.Response("No text", status=400, headers={"X-A": "1"})
    assert (response.status_code, response.body, response.headers["x-a"]) == (400, b"No text", "1")
    assert response.headers["content-type"].startswith("text/html")
    typed = https_fn.Response(b"{}", mimetype="application/json")
    assert (typed.status_code, typed.headers["content-type"]) == (200, "application/json")
