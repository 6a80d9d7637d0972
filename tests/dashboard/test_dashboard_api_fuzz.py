"""The JSON API fuzzed against its own OpenAPI document: no answer is a server error."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from starlette.routing import Route

from oncefire.testing import TestClock
from oncefire.web.dashboard import create_app
from tests.dashboard_shop import SECRET, TOKEN, build


@pytest.fixture
def api_schema(sqlite_url: str) -> Iterator[Any]:
    shop = build(sqlite_url, TestClock())
    shop.fail(3)
    shop.succeed(2)
    web = create_app(shop.app, token=TOKEN, allowed_hosts=["testserver", "localhost"])
    bearer = {"Authorization": f"Bearer {SECRET}"}
    yield schemathesis.openapi.from_asgi("/api/openapi.json", web, headers=bearer)
    shop.app.close()


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_never_answers_with_a_server_error(case: Any) -> None:
    response = case.call(headers={"Authorization": f"Bearer {SECRET}"})
    assert response.status_code < 500, (case.method, case.path, response.text)
    if response.status_code >= 400:
        assert "error" in response.json()


def test_the_openapi_document_is_valid_openapi_3(sqlite_url: str) -> None:
    from openapi_spec_validator import validate

    from oncefire.web.dashboard.openapi import document

    validate(document())


def test_every_api_route_is_in_the_openapi_document() -> None:
    """A route added to api.py without its entry in openapi.py fails here (and would go
    unfuzzed)."""
    from oncefire.web.dashboard.api import routes
    from oncefire.web.dashboard.openapi import document

    paths = document()["paths"]
    for route in routes:
        assert isinstance(route, Route)
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)
        if path == "/api/openapi.json":
            continue
        for method in sorted((route.methods or set()) - {"HEAD"}):
            assert method.lower() in paths.get(path, {}), f"{method} {path} is not in openapi.py"
