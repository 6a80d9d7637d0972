"""oncefire.firebase in one process: params from the environment and the .env files beside a
module, initialize_app()'s options, every Firebase option accepted and noted once, a CORS
preflight that does not run the function, and callables with no auth verifier."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from oncefire import App
from oncefire.errors import ConfigError
from oncefire.firebase import credentials, https_fn, options, params, pubsub_fn, set_auth_verifier
from oncefire.firebase.registration.apps import delete_app, get_app, initialize_app, set_default_app
from oncefire.loader import load_module
from oncefire.web.server import HttpServer

pytestmark = pytest.mark.e2e

MODULE = """\
from oncefire.firebase import params, options, initialize_app, https_fn

GREETING = params.StringParam("GREETING")
COUNT = params.IntParam("COUNT", default=1)
RATIO = params.define_float("RATIO", default=0.5)
ENABLED = params.BoolParam("ENABLED", default=False)
TAGS = params.ListParam("TAGS", default=["none"])
KEY = params.SecretParam("API_KEY")
app = initialize_app()


@https_fn.on_request(timeout_sec=COUNT, max_instances=params.IntParam("MAX", default=3))
def hello(req):
    return GREETING.value
"""


@pytest.fixture
def default_app(store_url: str) -> Iterator[App]:
    """A fresh default App; the environment and the module cache restored afterwards."""
    app = App(store_url)
    set_default_app(app)
    saved = dict(os.environ)
    yield app
    os.environ.clear()
    os.environ.update(saved)
    set_default_app(None)
    set_auth_verifier(None)
    app.close()


@pytest.fixture
def load(tmp_path: Path) -> Callable[..., Any]:
    """Write MODULE (and the given .env files) into a folder and load it as the CLI does."""

    def run(**env_files: str) -> Any:
        for name, text in env_files.items():
            (tmp_path / name.replace("_", ".")).write_text(text)
        main = tmp_path / "main.py"
        main.write_text(MODULE)
        sys.modules.pop("oncefire_user_main", None)
        params.forget_dotenv()  # each load reads the files anew, as a new process would
        return load_module(main)

    return run


def test_params_come_from_the_env_files_then_the_environment(
    default_app: App, load: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GCLOUD_PROJECT", "shop")
    monkeypatch.setenv("COUNT", "9")  # the environment wins over every file
    module = load(
        _env="GREETING=from env\nCOUNT=4\nRATIO=0.25\nTAGS=a,b\nAPI_KEY=k1\n# note\n",
        _env_shop='GREETING="from shop"\nENABLED=TRUE\n',
        _env_local='TAGS=["x", "y"]\n',
    )
    values = [p.value for p in (module.GREETING, module.COUNT, module.RATIO, module.ENABLED)]
    assert values == ["from shop", 9, 0.25, True]
    assert (module.TAGS.value, module.KEY.value) == (["x", "y"], "k1")
    trigger = default_app.triggers["hello"]
    assert (trigger.options.timeout, trigger.options.max_instances) == (9.0, 3)
    assert module.COUNT.compare(">", 5).then("big", "small").value == "big"
    assert module.GREETING.equals("other").value is False


def test_a_missing_param_is_refused_when_declared(
    default_app: App, load: Callable[..., Any]
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(_env="API_KEY=k\n")
    assert str(raised.value).startswith("Cannot load ")
    assert "Param GREETING has no value: set GREETING in the environment or in .env" in str(
        raised.value
    )
    with pytest.raises(ConfigError, match="Param COUNT='many' is not a valid int"):
        load(_env="GREETING=hi\nAPI_KEY=k\nCOUNT=many\n")
    with pytest.raises(ConfigError, match="UPPER_SNAKE_CASE"):
        params.StringParam("lower", default="x")


def test_initialize_app_gives_the_built_in_values(default_app: App) -> None:
    assert initialize_app().project_id is None and params.PROJECT_ID.value == ""
    set_default_app(App(default_app.settings.store, project_id="shop-demo"))
    app = initialize_app()
    assert (app.name, app.project_id) == ("[DEFAULT]", "shop-demo")
    assert app.options.get("storageBucket") == params.STORAGE_BUCKET.value
    assert app.options.get("storageBucket") == "shop-demo.appspot.com"
    assert app.options.get("databaseURL") == params.DATABASE_URL.value
    assert app.options.get("databaseURL") == "https://shop-demo-default-rtdb.firebaseio.com"
    other = initialize_app(options={"projectId": "elsewhere", "x": 1}, name="other")
    assert (other.project_id, other.options.get("x"), get_app("other")) == ("elsewhere", 1, other)
    assert app.db is not None and callable(app.drain)  # the rest is the oncefire App's
    keyed = initialize_app(credentials.Certificate("key.json"), name="keyed")
    assert keyed.credential.args == ("key.json",)
    delete_app(keyed)
    with pytest.raises(ConfigError, match="No Firebase app named 'keyed'"):
        get_app("keyed")
    replaced = set_default_app(default_app)
    assert replaced is not None
    replaced.close()


def test_every_firebase_option_is_accepted_and_noted_once(
    default_app: App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="oncefire.firebase.options")
    every: dict[str, Any] = {
        "region": [options.SupportedRegion.US_WEST4, options.SupportedRegion.ASIA_SOUTH1],
        "memory": options.MemoryOption.GB_2,
        "cpu": "gcf_gen1",
        "min_instances": params.IntParam("MIN", default=1),
        "concurrency": 80,
        "vpc_connector": "conn",
        "vpc_connector_egress_settings": options.VpcEgressSetting.ALL_TRAFFIC,
        "service_account": "sa@example",
        "ingress": options.IngressSetting.ALLOW_INTERNAL_ONLY,
        "labels": {"team": "a"},
        "secrets": [params.SecretParam("S1") if os.environ.setdefault("S1", "v") else "S1"],
        "enforce_app_check": True,
        "preserve_external_changes": True,
        "timeout_sec": options.RESET_VALUE,
    }
    options.set_global_options(max_instances=5, region="europe-west1")
    for name in ("first", "second"):

        def fn(event: object) -> None:
            return None

        fn.__name__ = name
        pubsub_fn.on_message_published(topic="t", **every)(fn)
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == len(every) - 1, notes  # timeout_sec is kept; each other note once
    assert "option region='europe-west1' has no meaning" in notes[0]
    assert any("min_instances='params.MIN'" in n for n in notes)
    assert any("memory=2048" in n for n in notes)
    first = default_app.triggers["first"].options
    assert (first.max_instances, first.timeout, first.retry) == (5, 60.0, False)
    options._globals.clear()


def test_a_preflight_is_answered_without_running_the_function_and_auth_without_verifier(
    default_app: App, caplog: pytest.LogCaptureFixture
) -> None:
    runs: list[str] = []

    @https_fn.on_request(cors=["https://a.example"])
    def tracked(req: https_fn.Request) -> Any:
        runs.append(req.method)
        return {"ran": True}

    @https_fn.on_call()
    def who(req: https_fn.CallableRequest[Any]) -> Any:
        return {"auth": req.auth, "token": req.instance_id_token}

    server = HttpServer(default_app, "127.0.0.1", 0)
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            origin = {"Origin": "https://a.example", "Access-Control-Request-Method": "PUT"}
            preflight = client.options("/tracked/deep/path", headers=origin)
            real = client.put("/tracked/deep/path", headers={"Origin": "https://a.example"})
            called = client.post(
                "/who",
                json={"data": None},
                headers={"Authorization": "Bearer x", "Firebase-Instance-ID-Token": "i1"},
            )
    finally:
        server.stop()
    assert preflight.status_code == 204 and runs == ["PUT"]
    assert preflight.headers["access-control-allow-origin"] == "https://a.example"
    assert real.json() == {"ran": True}
    assert real.headers["access-control-allow-origin"] == "https://a.example"
    assert called.json() == {"result": {"auth": None, "token": "i1"}}
    assert any("no verifier is set" in r.getMessage() for r in caplog.records)
