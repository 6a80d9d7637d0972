"""Firebase HTTP and callable functions under a real `oncefire run`, on both stores: the apps
of tests/e2e/apps/firebase/ written in Firebase's spelling, ported with `oncefire port` into a
temporary folder and served unchanged; httpx is the client."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from oncefire import App
from tests.e2e.cli_support import ONCEFIRE
from tests.e2e.test_run import answer, environment, free_port, wait_for

pytestmark = pytest.mark.e2e

APPS = Path(__file__).parent / "apps" / "firebase"
SECRET = "shared-secret-for-tests"
VERIFIER = f'''
import hashlib, hmac
from oncefire.firebase.https_fn import AuthData

def verify(token):
    """The shared-secret recipe of docs/firebase.md: the token is uid.signature."""
    uid, _, signature = token.rpartition(".")
    expected = hmac.new({SECRET!r}.encode(), uid.encode(), hashlib.sha256).hexdigest()
    if not uid or not hmac.compare_digest(signature, expected):
        raise ValueError("bad signature")
    return AuthData(uid=uid, token={{"uid": uid, "name": uid.title()}})
'''


def token(uid: str, secret: str = SECRET) -> str:
    """A token the shared-secret verifier takes."""
    signature = hmac.new(secret.encode(), uid.encode(), hashlib.sha256).hexdigest()
    return f"{uid}.{signature}"


def ported(name: str, folder: Path) -> Path:
    """apps/firebase/<name> ported into folder, beside copies of the .env files."""
    for env_file in APPS.glob(".env*"):
        shutil.copy(env_file, folder / env_file.name)
    out = folder / name
    result = subprocess.run(
        [ONCEFIRE, "port", str(APPS / name), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return out


@dataclass
class Server:
    """A running `oncefire run` and what it printed."""

    base: str
    process: subprocess.Popen[str]
    stderr: str = ""

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        _, self.stderr = self.process.communicate(timeout=60)
        assert self.process.returncode == 0, self.stderr


@pytest.fixture
def serve(store_url: str, tmp_path: Path) -> Iterator[object]:
    """serve(app_name, **env) -> a Server on the ported app; stopped at the end."""
    servers: list[Server] = []

    def start(name: str, **env: str) -> Server:
        main = ported(name, tmp_path)
        port = free_port()
        argv = [ONCEFIRE, "run", str(main), "--store", store_url, "--port", str(port)]
        argv += ["--no-dashboard", "--processes", "1"]
        process = subprocess.Popen(
            argv,
            env={**environment(), **env},
            cwd=tmp_path,
            stderr=subprocess.PIPE,
            text=True,
        )
        server = Server(f"http://127.0.0.1:{port}", process)
        servers.append(server)
        wait_for("the HTTP server", lambda: answer(f"{server.base}/_nowhere"))
        return server

    yield start
    for server in servers:
        if server.process.returncode is None:
            server.stop()


def call(base: str, name: str, data: object, **headers: str) -> httpx.Response:
    """A callable function called as Firebase's client SDKs call it."""
    return httpx.post(f"{base}/{name}", json={"data": data}, headers=headers, timeout=30)


def test_callable_protocol_success_and_each_error_status(serve, store_url: str) -> None:  # type: ignore[no-untyped-def]
    server = serve("callable_main.py")
    base = server.base
    added = call(base, "addnumbers", {"firstNumber": 2, "secondNumber": "3"})
    assert (added.status_code, added.json()) == (
        200,
        {"result": {"firstNumber": 2, "secondNumber": 3, "operationResult": 5}},
    )
    bad = call(base, "addnumbers", {"firstNumber": 2})
    assert bad.status_code == 400
    assert bad.json() == {
        "error": {
            "status": "INVALID_ARGUMENT",
            "message": 'The function must be called with two arguments, "firstNumber" and '
            '"secondNumber".',
            "details": {"got": {"firstNumber": 2}},
        }
    }
    for kind, status, code in [
        ("missing", 404, "NOT_FOUND"),
        ("denied", 403, "PERMISSION_DENIED"),
        ("busy", 503, "UNAVAILABLE"),
    ]:
        refused = call(base, "checkstock", kind)
        assert refused.status_code == status, refused.text
        assert refused.json()["error"]["status"] == code
        assert "details" not in refused.json()["error"]
    broken = call(base, "checkstock", "broken")
    assert (broken.status_code, broken.json()) == (
        500,
        {"error": {"status": "INTERNAL", "message": "INTERNAL"}},
    )
    assert "hunter2" not in broken.text
    assert call(base, "checkstock", None).json() == {"result": {"inStock": True, "auth": None}}
    bad_request = {"error": {"status": "INVALID_ARGUMENT", "message": "Bad Request"}}
    for response in [
        httpx.get(f"{base}/checkstock", timeout=30),
        httpx.post(f"{base}/checkstock", json={"nodata": 1}, timeout=30),
        httpx.post(f"{base}/checkstock", json={"data": 1, "extra": 2}, timeout=30),
        httpx.post(f"{base}/checkstock", content=b'{"data": 1}', timeout=30),  # no JSON type
    ]:
        assert (response.status_code, response.json()) == (400, bad_request), response.text
    below = httpx.post(f"{base}/checkstock/below", json={"data": 1}, timeout=30)
    assert below.status_code == 404  # a callable serves its own path only
    server.stop()
    app = App(store_url)
    outcomes = app.stats()["checkstock"].outcomes
    app.close()
    # Errors are recorded: the caller's mistakes as permanent, the others as failed.
    assert outcomes == {"succeeded": 1, "permanent": 6, "failed": 2}, outcomes


def test_callable_auth_goes_through_the_verifier_and_a_bad_token_is_a_401(  # type: ignore[no-untyped-def]
    serve, store_url: str, tmp_path: Path
) -> None:
    (tmp_path / "verifier.py").write_text(VERIFIER)
    server = serve("callable_main.py", ONCEFIRE_AUTH_VERIFIER=f"{tmp_path}/verifier.py:verify")
    base = server.base
    anonymous = call(base, "addmessage", {"text": "hi"})
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["status"] == "UNAUTHENTICATED"
    signed = call(base, "addmessage", {"text": "hi"}, Authorization=f"Bearer {token('ada')}")
    assert signed.status_code == 200, signed.text
    assert signed.json()["result"]["uid"] == "ada"
    unauthenticated = {"error": {"status": "UNAUTHENTICATED", "message": "Unauthenticated"}}
    for header in [f"Bearer {token('ada', 'wrong')}", f"Basic {token('ada')}", "Bearer"]:
        refused = call(base, "checkstock", None, Authorization=header)
        assert (refused.status_code, refused.json()) == (401, unauthenticated)
    server.stop()
    app = App(store_url)
    message = app.db.document(f"messages/{signed.json()['result']['id']}").get().to_dict()
    app.close()
    assert message == {"text": "hi", "author": {"uid": "ada", "name": "Ada"}}


def test_callables_answer_preflights_from_every_origin_unless_told(serve) -> None:  # type: ignore[no-untyped-def]
    base = serve("callable_main.py").base
    asked = {
        "Origin": "https://anywhere.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    preflight = httpx.options(f"{base}/addnumbers", headers=asked, timeout=30)
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "https://anywhere.example"
    assert preflight.headers["access-control-allow-methods"] == "POST"
    assert preflight.headers["access-control-allow-headers"] == "authorization, content-type"
    real = httpx.post(
        f"{base}/addnumbers",
        json={"data": {"firstNumber": 1, "secondNumber": 1}},
        headers={"Origin": "https://anywhere.example"},
        timeout=30,
    )
    assert real.headers["access-control-allow-origin"] == "https://anywhere.example"
    # addmessage names its origin: another origin gets no CORS header, even on its errors.
    other = httpx.options(f"{base}/addmessage", headers=asked, timeout=30)
    assert other.status_code == 204 and "access-control-allow-origin" not in other.headers
    own = httpx.post(
        f"{base}/addmessage",
        json={"data": {}},
        headers={"Origin": "https://app.example"},
        timeout=30,
    )
    assert own.status_code == 401
    assert own.headers["access-control-allow-origin"] == "https://app.example"


def test_a_flask_app_in_one_function_with_cors_params_and_the_logger(  # type: ignore[no-untyped-def]
    serve,
) -> None:
    server = serve("https_main.py", GCLOUD_PROJECT="shop-demo")
    base = server.base
    created = httpx.post(f"{base}/widgets/", json={"name": "gear", "teeth": 12}, timeout=30)
    assert (created.status_code, created.text) == (201, "created")
    assert created.headers["location"] == "/widgets/gear"
    httpx.post(f"{base}/widgets", json={"name": "bolt"}, timeout=30).raise_for_status()
    httpx.post(f"{base}/widgets/", json={"name": "cog"}, timeout=30).raise_for_status()
    missing_name = httpx.post(f"{base}/widgets/", json={"teeth": 1}, timeout=30)
    assert (missing_name.status_code, missing_name.json()) == (400, {"error": "name is required"})
    gear = httpx.get(f"{base}/widgets/gear", timeout=30)
    assert gear.headers["content-type"] == "application/json"
    assert gear.json() == {"name": "gear", "teeth": 12}
    listed = httpx.get(f"{base}/widgets", timeout=30)
    assert listed.json() == {"widgets": ["bolt", "cog"]}  # MAX_ITEMS=2 from .env
    for path in ["/widgets/nope", "/widgets/a/b/c"]:
        not_found = httpx.get(f"{base}{path}", timeout=30)
        assert not_found.status_code == 404
        assert not_found.headers["content-type"].startswith("text/html")  # Flask's own page
        assert "<title>404 Not Found</title>" in not_found.text
    described = httpx.get(f"{base}/describe/x/y", params={"z": "1"}, timeout=30).json()
    assert described == {
        "method": "GET",
        "path": "/x/y",
        "script_root": "/describe",
        "args": {"z": "1"},
        "project": "shop-demo",
        "bucket": "shop-demo.appspot.com",
    }
    assert httpx.get(f"{base}/describe", timeout=30).json()["path"] == "/"
    asked = {"Origin": "https://shop.example", "Access-Control-Request-Method": "GET"}
    preflight = httpx.options(f"{base}/greet", headers=asked, timeout=30)
    assert (preflight.status_code, preflight.text) == (204, "")
    assert preflight.headers["access-control-allow-origin"] == "https://shop.example"
    assert preflight.headers["access-control-allow-methods"] == "GET, POST"
    greeted = httpx.get(f"{base}/greet?name=Ada", headers={"Origin": "https://shop.example"})
    assert greeted.text == "Hello from .env.local, Ada!"  # .env.local wins over .env
    assert greeted.headers["access-control-allow-origin"] == "https://shop.example"
    assert greeted.headers["vary"] == "Origin"
    foreign = httpx.get(f"{base}/greet", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in foreign.headers
    server.stop()
    entries = [
        json.loads(line[line.index("{") :])
        for line in server.stderr.splitlines()
        if '"severity"' in line
    ]
    assert {"severity": "INFO", "message": "widget added", "name": "gear", "path": "/"} in entries
    ignored = [line for line in server.stderr.splitlines() if "has no meaning in oncefire" in line]
    # Noted once in each process that loads the module (the server's and the worker's).
    regions = [re.findall(r"\[(\d+)\]", line)[:1] for line in ignored if "option region=" in line]
    assert len(regions) == 2 and regions[0] != regions[1], ignored
    assert any("option min_instances='params.MIN_INSTANCES'" in line for line in ignored)


def test_a_missing_param_is_refused_at_load_in_one_line(tmp_path: Path) -> None:
    main = ported("https_main.py", tmp_path)
    for env_file in tmp_path.glob(".env*"):
        env_file.unlink()
    result = subprocess.run(
        [ONCEFIRE, "run", str(main), "--store", f"sqlite:///{tmp_path}/x.db"],
        env=environment(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Param GREETING has no value" in lines[0]


def test_without_flask_a_firebase_http_function_says_what_to_install(tmp_path: Path) -> None:
    main = ported("callable_main.py", tmp_path)
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['flask'] = None\n")
    env = {**environment(), "PYTHONPATH": str(blocker)}
    result = subprocess.run(
        [ONCEFIRE, "run", str(main), "--store", f"sqlite:///{tmp_path}/x.db"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "needs Flask" in last and "pip install 'oncefire[firebase]'" in last, last
