"""The README's quickstart, copied as written into a file and run, works and shows its
failures without any logging set up by the user."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from oncefire.loader import load_app
from oncefire.web.server import HttpServer
from tests.e2e.cli_support import Run

pytestmark = pytest.mark.sqlite_only  # above the store; PostgreSQL: postgres_smoke

README = Path(__file__).resolve().parents[2] / "README.md"


def quickstart() -> str:
    """The first python code block under '## Quickstart'."""
    text = README.read_text()
    section = text[text.index("## Quickstart") :]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None
    return found.group(1)


def http_snippet() -> tuple[str, list[str]]:
    """The README's HTTP function (the python block after "An HTTP function") and the curl
    command of the bash block that follows it, as its argument list."""
    text = README.read_text()
    section = text[text.index("An HTTP function") :]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    shell = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert code is not None and shell is not None
    [curl] = [line for line in shell.group(1).splitlines() if line.startswith("curl ")]
    return code.group(1), shlex.split(curl)


def run_script(folder: Path) -> subprocess.CompletedProcess[str]:
    """`python shop.py` in folder, with no ONCEFIRE_* variable set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    return subprocess.run(
        [sys.executable, "shop.py"],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        timeout=120,
    )


def test_the_readme_quickstart_runs_as_written(tmp_path: Path, run: Run) -> None:
    (tmp_path / "shop.py").write_text(quickstart())
    result = run_script(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "charged 500" in result.stdout
    # The failed attempt is visible with no logging configured, and so is the summary.
    assert "order has no amount" in result.stderr
    assert "dead letter" in result.stderr
    assert "succeeded" in result.stdout and "permanent" in result.stdout
    listing = run("dlq", "list", with_store=False)  # ./oncefire.db, beside shop.py
    assert listing.returncode == 0, listing.stderr
    assert "order has no amount" in listing.stdout


RETRIED = """
from oncefire import App

app = App()


@app.on_document_created("orders/{o}")
def charge(event):
    raise ValueError("gateway down")


app.db.document("orders/o1").set({"amount": 5})
app.drain()
"""


def test_a_retried_failure_shows_on_stderr_with_no_logging_configured(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(RETRIED)
    result = run_script(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "ValueError: gateway down; next attempt in 60.0 s" in result.stderr


def test_the_readme_http_function_answers_its_curl_and_starts_the_quickstarts_charge(
    store_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, curl = http_snippet()
    app_file = quickstart().replace(
        'if __name__ == "__main__":', code + '\n\nif __name__ == "__main__":'
    )
    (tmp_path / "app.py").write_text(app_file)
    monkeypatch.setenv("ONCEFIRE_STORE", store_url)
    app = load_app(str(tmp_path / "app.py"))  # as `oncefire run app.py` loads it
    server = HttpServer(app, "127.0.0.1", 0)
    server.start()
    try:
        assert curl[:3] == ["curl", "-X", "POST"] and curl[4] == "-d", curl
        path = curl[3].removeprefix("localhost:8080")
        answered = httpx.post(server.url + path, content=curl[5], timeout=30)
        assert answered.status_code == 200, answered.text
        order_id = answered.json()["id"]
        assert app.db.document(f"orders/{order_id}").get().to_dict() == {"amount": 500}
        app.drain()  # the write started charge_on_order
        assert "charged 500 with key" in capsys.readouterr().out
    finally:
        server.stop()
        app.close()
        sys.modules.pop("oncefire_user_app", None)
