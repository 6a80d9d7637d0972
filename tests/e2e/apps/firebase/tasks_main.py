"""Task queue functions as Firebase's guide to them describes: an HTTP function enqueues a
backfill of daily reports, and task queue functions build them under a rate limit and resize
images a few at a time, retried on Cloud Tasks' backoff. Written in Firebase's spelling; the
tests run it after `oncefire port`."""

import time
from datetime import date, timedelta

from firebase_admin import firestore, functions, initialize_app
from firebase_functions import https_fn, tasks_fn
from firebase_functions.options import RateLimits, RetryConfig

app = initialize_app()


@tasks_fn.on_task_dispatched(
    retry_config=RetryConfig(max_attempts=4, min_backoff_seconds=1, max_doublings=1),
    rate_limits=RateLimits(max_dispatches_per_second=4),
)
def buildreport(req: tasks_fn.CallableRequest) -> None:
    """Write the report of one day; a day asked to fail does so until its retries run out."""
    day = req.data["day"]
    retries = int(req.raw_request.headers.get("X-CloudTasks-TaskRetryCount", "0"))
    if retries < req.data.get("failures", 0):
        raise RuntimeError(f"the report of {day} is not ready yet")
    queue = req.raw_request.headers.get("X-CloudTasks-QueueName", "called over HTTP")
    firestore.client().collection("reports").document(day).set(
        {"day": day, "retries": retries, "queue": queue}
    )


@tasks_fn.on_task_dispatched(rate_limits=RateLimits(max_concurrent_dispatches=2))
def resizeimage(req: tasks_fn.CallableRequest) -> str:
    """Resize one image: slow work, at most two at a time whatever the number of workers."""
    time.sleep(0.4)
    return req.data["image"]


@https_fn.on_request()
def backfillreports(req: https_fn.Request) -> https_fn.Response:
    """Enqueue one report task per day from ?from= for ?days= days, each once by its id."""
    start = date.fromisoformat(req.args.get("from", "2026-01-01"))
    days = int(req.args.get("days", "7"))
    queue = functions.task_queue("buildreport")
    for n in range(days):
        day = (start + timedelta(days=n)).isoformat()
        options = functions.TaskOptions(
            task_id=f"report-{day}", dispatch_deadline_seconds=300, schedule_delay_seconds=0
        )
        queue.enqueue({"data": {"day": day}}, options)
    return https_fn.Response(f"Enqueued {days} tasks", status=200)
