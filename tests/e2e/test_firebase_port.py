"""`oncefire port`: every Firebase-spelled app of tests/e2e/apps/firebase/ ports and imports;
what oncefire does not offer is one line each, and --check changes nothing."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from oncefire import App
from oncefire.firebase.porting.rewrite import port
from oncefire.firebase.registration.apps import set_default_app
from oncefire.loader import load_module
from tests.e2e.cli_support import ONCEFIRE

pytestmark = pytest.mark.e2e

APPS = Path(__file__).parent / "apps" / "firebase"
NOT_OFFERED = """\
from firebase_functions import identity_fn, https_fn
from firebase_functions.alerts_fn import on_alert_published, FirebaseAlertData


@identity_fn.before_user_created()
def checkemail(event: identity_fn.AuthBlockingEvent) -> None:
    return None


@on_alert_published(alert_type="crashlytics.newFatalIssue")
def onfatal(event) -> None:
    return None


@https_fn.on_request()
def hello(req: https_fn.Request) -> https_fn.Response:
    return https_fn.Response("hi")
"""


def oncefire(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ONCEFIRE, "port", *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def default_app(sqlite_url: str) -> Iterator[App]:
    app = App(sqlite_url)
    set_default_app(app)
    saved = dict(os.environ)
    yield app
    os.environ.clear()
    os.environ.update(saved)
    set_default_app(None)
    app.close()


def test_check_lists_identity_fn_and_alerts_fn_one_line_each_and_exits_1(
    tmp_path: Path,
) -> None:
    main = tmp_path / "main.py"
    main.write_text(NOT_OFFERED)
    result = oncefire(str(main), "--check", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        f"{main}:1: identity_fn is not offered: no user directory: keep on Firebase Auth or "
        "call it over HTTP.",
        f"{main}:2: alerts_fn is not offered: Firebase Alerts is a Google-side service with "
        "nothing to run here: keep this function on Firebase.",
    ]
    assert main.read_text() == NOT_OFFERED  # --check changes nothing


def test_port_rewrites_imports_and_dotted_uses_only(tmp_path: Path) -> None:
    source = (
        "import os\n"
        "import firebase_admin\n"
        "import google.cloud.firestore\n"
        "from firebase_functions import https_fn, options  # the SDK\n"
        "from firebase_admin import initialize_app, firestore\n"
        "from google.cloud.firestore_v1.base_query import FieldFilter\n"
        "from google.cloud import firestore as gcf\n"
        'text = "firebase_functions stays in strings"\n'
        "gone = google.cloud.firestore.DELETE_FIELD\n"
        'cond = google.cloud.firestore_v1.base_query.FieldFilter("a", "==", 1)\n'
        "region = options.SupportedRegion.US_WEST4\n"
        "db = firebase_admin.firestore.client\n"
    )
    ported = port(source)
    assert ported.missing == ()
    assert ported.text == (
        "import os\n"
        "import oncefire.firebase as firebase_admin\n"
        "import oncefire.firebase.firestore\n"
        "from oncefire.firebase import https_fn, options  # the SDK\n"
        "from oncefire.firebase import initialize_app, firestore\n"
        "from oncefire.firebase.firestore import FieldFilter\n"
        "from oncefire.firebase import firestore as gcf\n"
        'text = "firebase_functions stays in strings"\n'
        "gone = oncefire.firebase.firestore.DELETE_FIELD\n"
        'cond = oncefire.firebase.firestore.FieldFilter("a", "==", 1)\n'
        "region = options.SupportedRegion.US_WEST4\n"
        "db = firebase_admin.firestore.client\n"
    )
    main = tmp_path / "main.py"
    main.write_text(source)
    printed = oncefire(str(main), cwd=tmp_path)
    assert (printed.returncode, printed.stdout) == (0, ported.text)
    written = oncefire(str(main), "-o", str(tmp_path / "out.py"), cwd=tmp_path)
    assert written.returncode == 0 and (tmp_path / "out.py").read_text() == ported.text
    assert main.read_text() == source
    unknown = port("from firebase_functions import options\nx = options.NoSuchOption\n")
    assert [(m.line, m.name) for m in unknown.missing] == [(2, "options.NoSuchOption")]


def test_a_file_that_is_not_python_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("def broken(:\n")
    result = oncefire("main.py", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "Error: Cannot port main.py, line 1: SyntaxError: invalid syntax."
    ]


@pytest.mark.parametrize("app_file", sorted(p.name for p in APPS.glob("*_main.py")))
def test_every_firebase_app_ports_and_imports(
    app_file: str, tmp_path: Path, default_app: App
) -> None:
    for env_file in APPS.glob(".env*"):
        shutil.copy(env_file, tmp_path / env_file.name)
    out = tmp_path / app_file
    result = oncefire(str(APPS / app_file), "-o", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    imported = {
        name
        for node in ast.walk(ast.parse(out.read_text()))
        for name in (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else []
        )
    }
    assert not {n for n in imported if n.startswith(("firebase_", "google.cloud"))}, imported
    sys.modules.pop(f"oncefire_user_{out.stem}", None)
    load_module(out)
    assert default_app.triggers, "the ported module declared no function"
