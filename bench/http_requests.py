"""Requests per second of HTTP functions under a real `oncefire run`, over loopback: a native
`app.on_request` function, a Firebase `https_fn.on_request` one (a Flask request and
response around the call) and a Firebase `https_fn.on_call` one (the callable protocol).

Each function answers a small JSON body; each request is recorded as an event and an attempt
in the store, as every HTTP request is. A few client threads in this process send requests
back to back over keep-alive connections for a window; the client shares the machine's cores
with the server, so the figures are of the pair.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from benchlib import (
    ONCEFIRE_PG_DB,
    common_args,
    ensure_database,
    log,
    pg_url,
    running,
    summarize,
    wait_until,
    write_json,
)

APP = """
from oncefire.firebase import default_app, https_fn

app = default_app()


@app.on_request("/native", methods=["POST"])
def native(event):
    return {"ok": event.data.get_json()["n"]}


@https_fn.on_request()
def flaskfn(req: https_fn.Request):
    return {"ok": req.get_json()["n"]}


@https_fn.on_call()
def callfn(req: https_fn.CallableRequest):
    return {"ok": req.data["n"]}
"""
KINDS: dict[str, tuple[str, dict[str, Any]]] = {
    "on_request": ("/native", {"n": 1}),
    "https_fn.on_request": ("/flaskfn", {"n": 1}),
    "https_fn.on_call": ("/callfn", {"data": {"n": 1}}),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def hammer(base: str, path: str, body: dict[str, Any], clients: int, window: float) -> float:
    """Requests per second answered 200 by clients threads over window seconds."""
    done = [0] * clients
    stop = time.monotonic() + window

    def client(slot: int) -> None:
        with httpx.Client(base_url=base, timeout=30) as http:
            while time.monotonic() < stop:
                if http.post(path, json=body).status_code == 200:
                    done[slot] += 1

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done) / (time.monotonic() - started)


def main() -> None:
    parser = common_args(__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="oncefire-http-bench-"))
    (folder / "main.py").write_text(APP)
    if args.store == "postgres":
        ensure_database(ONCEFIRE_PG_DB)
        store = pg_url(ONCEFIRE_PG_DB)
    else:
        store = f"sqlite:///{folder}/bench.db"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    oncefire = str(Path(sys.executable).parent / "oncefire")
    cmd = [oncefire, "run", str(folder / "main.py"), "--store", store, "--port", str(port)]
    cmd += ["--no-dashboard", "--processes", "1"]
    per_run: dict[str, list[float]] = {kind: [] for kind in KINDS}
    load_before = os.getloadavg()
    with running(cmd, log_path=folder / "server.log"):

        def up() -> bool:
            try:
                return httpx.post(f"{base}/native", json={"n": 0}).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(up, 60, "the HTTP server")
        for path, body in KINDS.values():
            hammer(base, path, body, args.clients, min(1.0, args.window))  # warm up
        for run in range(args.runs):
            for kind, (path, body) in KINDS.items():
                rate = hammer(base, path, body, args.clients, args.window)
                per_run[kind].append(round(rate, 1))
                log(f"run {run + 1}: {kind:<22} {rate:8.1f} requests/s")
    write_json(
        args.json,
        {
            "store": args.store,
            "window": args.window,
            "clients": args.clients,
            "runs": args.runs,
            "load_average": [round(x, 2) for x in (*load_before, *os.getloadavg())],
            "results": {kind: summarize(rates) for kind, rates in per_run.items()},
        },
    )


if __name__ == "__main__":
    main()
