"""Seed a store with an hour of runs, serve it with ``tickwork api`` and photograph the
dashboard's activity page (see ``scripts/screenshot``). Deterministic data: the same
picture each time but for the clock."""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

from playwright.sync_api import sync_playwright

from tickwork.client import Client
from tickwork.job import JobSpec
from tickwork.retry import RetryPolicy
from tickwork.schedule import Once
from tickwork.store import open_store

CHROMIUM = "/usr/bin/chromium"
READY = re.compile(r"ready on (?P<url>http://\S+)")
JOBS = [("nightly-export", "exports"), ("send-digest", "mail"), ("sync-billing", "default")]


def seed(url: str) -> None:
    store = open_store(url)
    client = Client(store)
    jobs = {
        queue: client.submit(
            "http", args={"url": f"https://example.com/{name}"}, name=name, queue=queue,
            cron="*/5 * * * *",
        ).job
        for name, queue in JOBS
    }
    start = store.now().replace(second=0, microsecond=0) - timedelta(minutes=60)
    for i in range(60):
        t = start + timedelta(minutes=i)
        burst = 4 + round(3 * math.sin(i / 6)) + (6 if 35 <= i < 42 else 0)
        for k in range(burst):
            queue = ("default", "mail", "exports")[k % 3]
            job = jobs[queue]
            attempts = 1 if (i + k) % 17 == 0 else 3
            spec = JobSpec(
                task="http", args=job.args, queue=queue, schedule=Once(at=t),
                retry=RetryPolicy(max_attempts=attempts),
            )
            store.submit(spec, now=t + timedelta(milliseconds=k))
        # Slower workers while the burst lasts: a backlog and a lag spike.
        capacity = burst + 4 if not 35 <= i < 45 else 5
        lag = timedelta(milliseconds=40 + 30 * (i % 7) + (1800 if 36 <= i < 44 else 0))
        claimed = store.claim("worker-1", limit=capacity, now=t + lag)
        for n, run in enumerate(claimed):
            done = t + timedelta(seconds=8 + n) + lag
            if (i + n) % 11 == 0:
                store.fail(run.id, run.fencing_token, "HTTP 503 from example.com", now=done,
                           retry_after=timedelta(seconds=20))
            elif (i + n) % 17 == 0:
                store.fail(run.id, run.fencing_token, "HTTP 404 from example.com", now=done,
                           discard=True)
            else:
                store.complete(run.id, run.fencing_token, now=done)
        store.fold_minutes(now=t + timedelta(seconds=50))
    store.fold_minutes()
    store.close()


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/screenshot.db"
        seed(url)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
        server = subprocess.Popen(
            [sys.executable, "-m", "tickwork", "api", "--db", url, "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**env, "PYTHONUNBUFFERED": "1"},
        )
        try:
            assert server.stdout is not None
            base = ""
            for line in server.stdout:
                if match := READY.search(line):
                    base = match.group("url").rstrip(")")
                    break
            if not base:
                raise SystemExit("tickwork api did not start")
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
                )
                page = browser.new_page(viewport={"width": 1280, "height": 1100})
                page.goto(f"{base}/activity?window=1h")
                page.wait_for_selector("#chart-outcomes")
                out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(out), full_page=True)
                browser.close()
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=20)
    print(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
