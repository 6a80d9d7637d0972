"""The installed wheel, not the checkout: it ships every file the package reads, and from a
fresh virtualenv `oncefire run` serves an HTTP function and the dashboard (a page and a static
file) of an app in a folder of its own (issue 44 point 1)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.wheel_env import ROOT, WheelEnv

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SOURCE = ROOT / "src" / "oncefire"
APP = """\
from oncefire import App

app = App()


@app.on_request("/hello")
def hello(event):
    name = event.data.query_params.get("name", "world")
    app.db.document(f"greetings/{name}").set({"name": name})
    return f"hello {name}"


@app.on_document_created("greetings/{name}")
def count_greeting(event):
    pass
"""


def test_the_wheel_ships_every_file_of_the_package(wheel_env: WheelEnv) -> None:
    shipped = set(zipfile.ZipFile(wheel_env.wheel).namelist())
    files = {
        path.relative_to(SOURCE.parent).as_posix()
        for path in SOURCE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert {"oncefire/web/dashboard/static/dashboard.css", "oncefire/features/prices.toml"} <= files
    assert sorted(files - shipped) == []


def test_the_installed_wheel_serves_an_http_function_and_the_dashboard(
    wheel_env: WheelEnv, tmp_path: Path
) -> None:
    (tmp_path / "app.py").write_text(APP)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    env["ONCEFIRE_SHUTDOWN_GRACE"] = "5"
    argv = [str(wheel_env.oncefire), "run", "app.py", "--store", f"sqlite:///{tmp_path}/app.db"]
    process = subprocess.Popen(
        [*argv, "--port", str(port), "--processes", "1"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                hello = httpx.get(f"{base}/hello", params={"name": "wheel"}, timeout=30)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "oncefire run never answered"
                time.sleep(0.1)
        assert (hello.status_code, hello.text) == (200, "hello wheel")
        page = httpx.get(f"{base}/_oncefire/", timeout=30)
        assert page.status_code == 200, page.text
        assert "count_greeting" in page.text and "</html>" in page.text
        css = httpx.get(f"{base}/_oncefire/static/dashboard.css", timeout=30)
        assert css.status_code == 200, css.text
        css_file = SOURCE / "web" / "dashboard" / "static" / "dashboard.css"
        assert css.content == css_file.read_bytes()
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert "Traceback" not in stderr, stderr
    where = subprocess.run(
        [wheel_env.python, "-c", "import oncefire; print(oncefire.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert where.stdout.startswith(str(wheel_env.env)), where.stdout  # the wheel's, not ours
