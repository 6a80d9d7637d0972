"""The HTML pages: functions, a function's three tabs, a dead letter, an event, the audit trail,
and the forms that act on dead letters (POST, CSRF token, then a redirect). As in api.py,
store calls run in the dashboard's threads (`@off_loop`, `in_thread`)."""

from __future__ import annotations

import hmac
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from oncefire.errors import ConfigError
from oncefire.model import codec
from oncefire.operations.history import OUTCOMES
from oncefire.web.dashboard import views
from oncefire.web.dashboard.api import app_of, dead_id, int_param, text_param
from oncefire.web.dashboard.security import COOKIE, require_csrf
from oncefire.web.dashboard.threads import in_thread, off_loop

DONE = ("replayed", "dismissed")  # what a bulk action's redirect says it did, and how many

templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))


def _when(value: float | None) -> str:
    if value is None:
        return "-"
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.3g} s"
    if value < 7200:
        return f"{value / 60:.0f} min"
    return f"{value / 3600:.1f} h"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


templates.env.filters.update(
    when=_when,
    seconds=_seconds,
    pct=_pct,
    pretty=lambda v: json.dumps(v, indent=2, ensure_ascii=False, default=str),
)


def render(request: Request, name: str, status: int = 200, **context: Any) -> Response:
    """A page, with what every page needs: the CSRF token, the actor, whether tokens exist."""
    guard = request.app.state.guard
    context.update(
        csrf=guard.csrf_token(request),
        actor=getattr(request.state, "actor", None),
        has_tokens=bool(guard.tokens),
        now=app_of(request).clock.now(),
    )
    return templates.TemplateResponse(request, name, context, status_code=status)


def back_to(request: Request, name: str, tab: str = "dead-letters") -> RedirectResponse:
    """After an action, to the function's tab (303: the browser GETs it)."""
    url = request.url_for("function_page", name=name)
    return RedirectResponse(f"{url}?tab={tab}", status_code=303)


TABS = ("triggers", "dead-letters", "executions")


@off_loop
def functions_page(request: Request) -> Response:
    """The functions page."""
    app = app_of(request)
    return render(
        request, "functions.html", functions=views.functions(app), unrouted=app.unrouted_report()
    )


@off_loop
def function_page(request: Request) -> Response:
    """A function's page: the Triggers, Dead Letters or Executions tab."""
    app, name = app_of(request), request.path_params["name"]
    summary = views.function(app, name)
    tab = request.query_params.get("tab") or "triggers"
    if tab not in TABS:
        raise ConfigError(f"tab={tab!r}: a function's page has the tabs {', '.join(TABS)}.")
    # Paged as the API pages the same list (and refused as it refuses), on every tab.
    before = int_param(request, "before", None, 1, 2**62)
    limit = int_param(request, "limit", 50, 1, 500 if tab == "executions" else 1000) or 50
    context: dict[str, Any] = {"f": summary, "tab": tab, "outcomes": OUTCOMES}
    context["refresh_ms"] = int(request.app.state.refresh_seconds * 1000)
    if tab == "triggers":
        context["chart"] = views.chart(summary["per_hour"])
    elif tab == "dead-letters":
        error, group = text_param(request, "error"), text_param(request, "group")
        context["error_filter"], context["group_filter"] = error, group
        context["dead"] = views.dead_letters(
            app, name, error_contains=error, error_group=group, before=before, limit=limit
        )
        context["done"] = {
            verb: int(n) for verb in DONE if (n := request.query_params.get(verb, "")).isdigit()
        }
    else:
        outcome = text_param(request, "outcome")
        context["outcome"] = outcome
        context["executions"] = app.history.executions(name, outcome=outcome, limit=limit)
    return render(request, "function.html", **context)


@off_loop
def dead_letter_page(request: Request) -> Response:
    """A dead letter: payload, editor, attempts."""
    found = views.dead_letter(app_of(request), dead_id(request))
    text = json.dumps(found["payload"], indent=2, ensure_ascii=False, default=str)
    return render(request, "dead_letter.html", d=found, payload_text=text)


@off_loop
def event_page(request: Request) -> Response:
    """An event and every delivery's attempts."""
    found = app_of(request).history.event(request.path_params["id"])
    return render(request, "event.html", e=found)


@off_loop
def audit_page(request: Request) -> Response:
    """The audit trail."""
    before = int_param(request, "before", None, 1, 2**62)
    limit = int_param(request, "limit", 50, 1, 500) or 50
    entries = app_of(request).operators.audit_log(limit, before)
    return render(request, "audit.html", entries=entries, limit=limit)


def single_page(verb: str) -> Any:
    """POST /dead-letters/{id}/{verb} from a form: replay or dismiss one dead letter."""

    async def endpoint(request: Request) -> Response:
        await require_csrf(request)
        app = app_of(request)

        def act() -> str:
            letter = app.dead_letters.get(dead_id(request))
            getattr(app.operators, verb)(letter.id, actor=request.state.actor)
            return letter.function

        return back_to(request, await in_thread(act))

    return endpoint


async def replay_edited_page(request: Request) -> Response:
    """Replay one dead letter with the payload of the editor."""
    await require_csrf(request)
    app = app_of(request)
    letter = await in_thread(app.dead_letters.get, dead_id(request))
    text = str((await request.form()).get("payload") or "")
    payload = codec.parse(text, "The edited payload")
    actor = request.state.actor
    await in_thread(app.operators.replay_edited, letter.id, payload, actor=actor)
    return back_to(request, letter.function)


def bulk_page(verb: str) -> Any:
    """POST /functions/{name}/{verb}-all: a group or the current filter, once confirmed; the
    tab it returns to says how many were changed."""

    async def endpoint(request: Request) -> Response:
        await require_csrf(request)
        app, name = app_of(request), request.path_params["name"]
        await in_thread(views.trigger_of, app, name)
        form = await request.form()
        error = str(form.get("error_contains") or "") or None
        group = form.get("error_group")
        done = await in_thread(
            getattr(app.operators, f"{verb}_all"),
            name,
            error_contains=error,
            error_group=None if error or group is None else str(group),
            actor=request.state.actor,
            batch=views.BULK_BATCH,
        )
        url = request.url_for("function_page", name=name)
        return RedirectResponse(f"{url}?tab=dead-letters&{verb}ed={done}", status_code=303)

    return endpoint


def pause_page(verb: str) -> Any:
    """POST /functions/{name}/pause or /resume: recorded in the audit log; back to the functions."""

    async def endpoint(request: Request) -> Response:
        await require_csrf(request)
        act = getattr(app_of(request).operators, verb)
        await in_thread(act, request.path_params["name"], actor=request.state.actor)
        return RedirectResponse(str(request.url_for("functions_page")), status_code=303)

    return endpoint


async def login(request: Request, message: str | None = None) -> Response:
    """The sign-in form (also what a page answers, with 401, to a request without a token)."""
    status = 401 if getattr(request.state, "actor", None) is None else 200
    return render(request, "login.html", status=status, message=message)


async def login_post(request: Request) -> Response:
    """Check the token and set the session cookie."""
    await require_csrf(request)
    guard = request.app.state.guard
    given = str((await request.form()).get("token") or "")
    if not any(hmac.compare_digest(given, secret) for secret in guard.tokens):
        return render(request, "login.html", status=401, message="That token is not valid.")
    response = RedirectResponse(str(request.url_for("functions_page")), status_code=303)
    response.set_cookie(
        COOKIE,
        guard.session_of(given),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path=request.scope.get("root_path") or "/",
    )
    return response


async def logout(request: Request) -> Response:
    """Forget the session cookie."""
    await require_csrf(request)
    response = RedirectResponse(str(request.url_for("login")), status_code=303)
    response.delete_cookie(COOKIE, path=request.scope.get("root_path") or "/")
    return response


def error_page(request: Request, status: int, title: str, message: str) -> Response:
    """An error as a page."""
    return render(request, "error.html", status=status, title=title, message=message)


routes = [
    Route("/", functions_page, name="functions_page"),
    Route("/functions/{name:str}", function_page, name="function_page"),
    Route("/functions/{name:str}/replay-all", bulk_page("replay"), methods=["POST"],
          name="replay_all_page"),
    Route("/functions/{name:str}/dismiss-all", bulk_page("dismiss"), methods=["POST"],
          name="dismiss_all_page"),
    Route("/functions/{name:str}/pause", pause_page("pause"), methods=["POST"],
          name="pause_page"),
    Route("/functions/{name:str}/resume", pause_page("resume"), methods=["POST"],
          name="resume_page"),
    Route("/dead-letters/{id:int}", dead_letter_page, name="dead_letter_page"),
    Route("/dead-letters/{id:int}/replay", single_page("replay"), methods=["POST"],
          name="replay_page"),
    Route("/dead-letters/{id:int}/dismiss", single_page("dismiss"), methods=["POST"],
          name="dismiss_page"),
    Route("/dead-letters/{id:int}/replay-edited", replay_edited_page, methods=["POST"],
          name="replay_edited_page"),
    Route("/events/{id:str}", event_page, name="event_page"),
    Route("/audit", audit_page, name="audit_page"),
    Route("/login", login, name="login"),
    Route("/login", login_post, methods=["POST"], name="login_post"),
    Route("/logout", logout, methods=["POST"], name="logout"),
]  # fmt: skip
