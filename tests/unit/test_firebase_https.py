"""oncefire.firebase's HTTP pieces without a server: the Flask request built from a read
request, the response turned back, CORS policies, HttpsError's wire form, Firebase's option
enums and the structured logger."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

import flask
import pytest

from oncefire.errors import ConfigError
from oncefire.events import Event
from oncefire.firebase import logger, options
from oncefire.firebase.http import cors, flask_bridge
from oncefire.firebase.https_fn import FunctionsErrorCode, HttpsError
from oncefire.web.http_functions import Request


def event(path: str, body: bytes = b"", query: str = "", **headers: str) -> Event:
    raw = [
        (b"host", b"example.test"),
        *((k.lower().encode(), v.encode()) for k, v in headers.items()),
    ]
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": raw,
        "scheme": "http",
        "server": ("example.test", 80),
        "client": ("10.0.0.7", 5000),
        "http_version": "1.1",
    }
    return Event(
        id="e1",
        type="http.request",
        source=path,
        time=datetime.now(UTC),
        data=Request(scope, body),
        params={},
        attempt=1,
        size=0,
        function="fn",
        raw={},
    )


def served(path: str, respond: Any, **kwargs: Any) -> Any:
    return flask_bridge.serve(event(path, **kwargs), "/addmessage", respond)


def test_the_request_is_flasks_with_the_path_below_the_function() -> None:
    seen: dict[str, Any] = {}

    def respond(request: flask.Request) -> Any:
        seen.update(
            kind=type(request),
            path=request.path,
            root=request.script_root,
            url=request.url,
            args=request.args.getlist("tag"),
            json=request.get_json(),
            remote=request.remote_addr,
            header=request.headers.get("X-Thing"),
            current=flask.request.path,
        )
        return flask.jsonify(ok=True)

    response = served(
        "/addmessage/a/b",
        respond,
        body=b'{"a": 1}',
        query="tag=x&tag=y",
        **{"Content-Type": "application/json", "X-Thing": "t"},
    )
    assert seen == {
        "kind": flask.Request,
        "path": "/a/b",
        "root": "/addmessage",
        "url": "http://example.test/addmessage/a/b?tag=x&tag=y",
        "args": ["x", "y"],
        "json": {"a": 1},
        "remote": "10.0.0.7",
        "header": "t",
        "current": "/a/b",
    }
    assert (response.status_code, json.loads(response.body)) == (200, {"ok": True})
    assert response.headers["content-type"] == "application/json"
    assert response.headers["content-length"] == str(len(response.body))


def test_every_header_of_the_flask_response_is_kept() -> None:
    def respond(request: flask.Request) -> Any:
        response = flask.make_response(("created", 201, {"X-A": "1"}))
        response.set_cookie("a", "1")
        response.set_cookie("b", "2")
        return response

    response = served("/addmessage", respond)
    assert (response.status_code, response.body) == (201, b"created")
    assert response.headers["x-a"] == "1"
    assert response.headers["content-type"].startswith("text/html")
    assert [v.split(";")[0] for v in response.headers.getlist("set-cookie")] == ["a=1", "b=2"]


def test_cors_policies_from_each_spelling() -> None:
    assert cors.policy(None) is None and cors.policy(False) is None
    every = cors.policy(True)
    assert every is not None and every.allowed_origin("https://a.example") == "https://a.example"
    one = cors.policy(options.CorsOptions(cors_origins="https://a.example", cors_methods="get"))
    assert one is not None and one.methods == ("GET",)
    assert one.allowed_origin("https://a.example") == "https://a.example"
    assert one.allowed_origin("https://b.example") is None
    pattern = cors.policy([re.compile(r"https://.*\.example")])
    assert pattern is not None and pattern.allowed_origin("https://x.example") is not None
    assert pattern.allowed_origin("https://x.example.evil") is None
    with pytest.raises(ConfigError, match="cors=42"):
        cors.policy(42)


def test_https_error_wire_form_and_statuses() -> None:
    error = HttpsError(FunctionsErrorCode.INVALID_ARGUMENT, "bad", {"field": "x"})
    assert error._as_dict() == {
        "status": "INVALID_ARGUMENT",
        "message": "bad",
        "details": {"field": "x"},
    }
    assert error.status == 400
    statuses = {code.name: HttpsError(code, "m").status for code in FunctionsErrorCode}
    assert statuses["UNAUTHENTICATED"] == 401 and statuses["RESOURCE_EXHAUSTED"] == 429
    assert statuses["CANCELLED"] == 499 and statuses["UNIMPLEMENTED"] == 501
    assert "details" not in HttpsError(FunctionsErrorCode.INTERNAL, "m")._as_dict()
    with pytest.raises(ValueError, match="Unknown error code"):
        HttpsError("not-a-code", "m")  # type: ignore[arg-type]


def test_every_firebase_option_value_exists() -> None:
    assert len(options.SupportedRegion) == 25
    assert options.SupportedRegion("us-west4") is options.SupportedRegion.US_WEST4
    assert options.SupportedRegion.NORTHAMERICA_NORTHEAST1.value == "northamerica-northeast1"
    assert [m.value for m in options.MemoryOption][-1] == 32 << 10
    assert {m.value for m in options.VpcEgressSetting} == {"PRIVATE_RANGES_ONLY", "ALL_TRAFFIC"}
    assert len(options.IngressSetting) == 3
    assert str(options.Timezone("America/New_York")) == "America/New_York"
    assert repr(options.RESET_VALUE) == "RESET_VALUE"


def test_the_logger_writes_cloud_logging_json_through_python_logging(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="oncefire.firebase.logger")
    looped: dict[str, Any] = {"k": 1}
    looped["self"] = looped
    logger.info("charged", {"n": 1}, order="o1", amount=5)
    logger.warn("slow")
    logger.error(looped=looped)
    logger.log("notice")
    logger.debug("quiet")
    logger.write({"severity": "CRITICAL", "message": "raw"})
    entries = [json.loads(r.getMessage()) for r in caplog.records]
    levels = [r.levelno for r in caplog.records]
    assert entries == [
        {"severity": "INFO", "message": 'charged {"n": 1}', "order": "o1", "amount": 5},
        {"severity": "WARNING", "message": "slow"},
        {"severity": "ERROR", "looped": {"k": 1, "self": "[CIRCULAR]"}},
        {"severity": "NOTICE", "message": "notice"},
        {"severity": "DEBUG", "message": "quiet"},
        {"severity": "CRITICAL", "message": "raw"},
    ]
    assert levels == [20, 30, 40, 20, 10, 50]
