#!/usr/bin/env python3
"""A Spool remote activity worker in Python, standard library only.

It runs the activities `charge` and `ship` (those of test/fixtures/remoteMachines.ts) for a
`spool serve` started with a worker token, over the wire protocol of docs/remote-workers.md:
claim by long-poll, heartbeat while running, complete or fail with the attempt token, and on
SIGTERM/SIGINT finish the attempt in hand and exit 0.

    spool --machines ./machines.ts serve --worker-token "$WORKER_TOKEN"
    python3 examples/python-worker/worker.py --server http://127.0.0.1:7420 --token "$WORKER_TOKEN"
"""
import argparse
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request


class Refused(Exception):
    """The server refused a call (its error body's code): drop the attempt, do not retry."""

    def __init__(self, status, error):
        super().__init__(f"{status} {error.get('code')}: {error.get('message')}")
        self.status = status
        self.code = error.get("code")


class Unreachable(Exception):
    """The server could not be reached, or asked to try again later (5xx)."""


class Server:
    def __init__(self, url, token):
        self.url = url.rstrip("/")
        self.token = token

    def post(self, route, body, timeout=60):
        data = json.dumps(body).encode()
        req = urllib.request.Request(self.url + route, data=data, method="POST", headers={
            "authorization": f"Bearer {self.token}",
            "content-type": "application/json",
        })
        try:
            with urllib.request.urlopen(req, timeout=timeout) as res:
                return json.loads(res.read() or b"{}")
        except urllib.error.HTTPError as e:
            text = e.read()
            if e.code >= 500:
                raise Unreachable(f"HTTP {e.code}")
            try:
                error = json.loads(text)["error"]
            except Exception:
                error = {"code": "SPOOL_HTTP", "message": text[:200].decode(errors="replace")}
            raise Refused(e.code, error)
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            raise Unreachable(str(e))

    def post_until_answered(self, route, body, stopping):
        """Send until the server answers (a completion held across an outage is applied once)."""
        delay = 0.2
        while True:
            try:
                return self.post(route, body)
            except Unreachable as e:
                log({"type": "server.unreachable", "message": str(e), "retryInMs": int(delay * 1000)})
                time.sleep(delay)
                delay = min(delay * 2, 5.0)


def log(event):
    print(json.dumps(event), flush=True)


class Activity:
    """What an activity gets: its input, idempotency key, attempt, and progress/asset reports."""

    def __init__(self, server, dispatch):
        self.server = server
        self.dispatch = dispatch
        self.input = dispatch["input"]
        self.idempotency_key = dispatch["idempotencyKey"]
        self.attempt = dispatch["attempt"]

    def progress(self, percent):
        self.server.post("/api/workers/progress", {"token": self.dispatch["token"], "percent": percent})

    def attach_asset(self, asset):
        self.server.post("/api/workers/assets", {"token": self.dispatch["token"], "asset": asset})


def charge(a):
    a.progress(50)
    if a.input.get("failFirst") and a.attempt == 1:
        raise RetryableFailure("card declined once", retry_after_ms=0)
    a.attach_asset({"type": "receipt", "uri": f"receipt://{a.idempotency_key}"})
    return {"charged": a.input["amount"], "attempt": a.attempt, "by": "python"}


def ship(a):
    return {"shipped": True, "by": "python"}


ACTIVITIES = {"charge": charge, "ship": ship}


class RetryableFailure(Exception):
    def __init__(self, message, retry_after_ms=None):
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


def heartbeat(server, token, interval, done):
    while not done.wait(interval):
        try:
            server.post("/api/workers/heartbeat", {"token": token}, timeout=10)
        except Unreachable:
            pass  # the server is away: the next beat tries again
        except Refused:
            return  # no longer ours: its completion will be refused too


def run_attempt(server, dispatch, stopping):
    token = dispatch["token"]
    log({"type": "activity.started", "jobId": dispatch["jobId"], "activity": dispatch["activity"], "attempt": dispatch["attempt"]})
    done = threading.Event()
    beat = threading.Thread(target=heartbeat, args=(server, token, max(0.2, dispatch["claimMs"] / 3000), done), daemon=True)
    beat.start()
    try:
        output = ACTIVITIES[dispatch["activity"]](Activity(server, dispatch))
        route, body = "/api/workers/complete", {"token": token, "output": output}
    except Exception as e:  # the activity failed: the server applies its retry policy
        error = {"name": type(e).__name__, "message": str(e)}
        if getattr(e, "retry_after_ms", None) is not None:
            error["retryAfterMs"] = e.retry_after_ms
        route, body = "/api/workers/fail", {"token": token, "error": error}
    finally:
        done.set()
    try:
        answer = server.post_until_answered(route, body, stopping)
        log({"type": "activity.finished", "jobId": dispatch["jobId"], "activity": dispatch["activity"], "outcome": answer["outcome"], "duplicate": answer["duplicate"]})
    except Refused as e:
        log({"type": "activity.refused", "jobId": dispatch["jobId"], "code": e.code})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=os.environ.get("SPOOL_SERVER", "http://127.0.0.1:7420"))
    parser.add_argument("--token", default=os.environ.get("SPOOL_WORKER_TOKEN"))
    parser.add_argument("--wait-ms", type=int, default=5000, help="how long one claim waits for work")
    args = parser.parse_args()
    if not args.token:
        sys.exit("worker.py: --token (or SPOOL_WORKER_TOKEN) is required: a worker token of `spool serve --worker-token`")
    server = Server(args.server, args.token)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    log({"type": "worker.ready", "server": args.server, "activities": sorted(ACTIVITIES), "pid": os.getpid()})
    delay = 0.2
    while not stopping.is_set():
        try:
            # One attempt at a time; a long-poll returns at once when work is due.
            claimed = server.post("/api/workers/claim", {"slots": 1, "activities": sorted(ACTIVITIES), "waitMs": args.wait_ms})
            delay = 0.2
        except Unreachable as e:
            log({"type": "server.unreachable", "message": str(e), "retryInMs": int(delay * 1000)})
            stopping.wait(delay)
            delay = min(delay * 2, 5.0)
            continue
        for dispatch in claimed["dispatches"]:
            run_attempt(server, dispatch, stopping)
    log({"type": "worker.stopped"})


if __name__ == "__main__":
    main()
