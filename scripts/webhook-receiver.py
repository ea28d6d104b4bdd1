#!/usr/bin/env python3
"""A webhook receiver for one machine: listens on 127.0.0.1, verifies every delivery with the
tenant's signing secret (Standard Webhooks, the ``standardwebhooks`` package), prints each
verified event as one JSON line and answers 204; a bad signature answers 401 and is printed
as refused. A retry of an event it already verified (same ``webhook-id``) is answered 204 and
not printed again.

    scripts/webhook-receiver.py --port 9100 --secret-file var/webhook-secret [--count 1]

With ``--count N`` it exits (status 0) after N verified events, or with status 1 when
``--timeout`` seconds pass first. See docs/runs.md, "Callbacks on one machine".
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    secret = parser.add_mutually_exclusive_group(required=True)
    secret.add_argument("--secret", help="the tenant's signing secret, whsec_…")
    secret.add_argument("--secret-file", type=Path, help="a file holding the secret")
    parser.add_argument("--count", type=int, default=0, help="exit after this many events")
    parser.add_argument("--timeout", type=float, default=120, help="with --count: give up after")
    options = parser.parse_args(argv)
    key = options.secret or options.secret_file.read_text(encoding="utf-8").strip()
    webhook = Webhook(key)
    seen: set[str] = set()
    enough = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            try:
                event = webhook.verify(body, headers)
            except WebhookVerificationError as exc:
                self.send_response(401)
                self.end_headers()
                say({"verified": False, "path": self.path, "error": str(exc)})
                return
            self.send_response(204)
            self.end_headers()
            webhook_id = headers.get("webhook-id", "")
            if webhook_id in seen:
                return
            seen.add(webhook_id)
            say({"verified": True, "webhook-id": webhook_id, "path": self.path, **event})
            if options.count and len(seen) >= options.count:
                enough.set()

        def log_message(self, format: str, *args: object) -> None:
            pass  # one line per event is printed by ``say``; no access log

    server = ThreadingHTTPServer((options.host, options.port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"listening on http://{options.host}:{options.port}/", file=sys.stderr, flush=True)
    try:
        if options.count:
            return 0 if enough.wait(options.timeout) else 1
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0


def say(record: dict) -> None:
    print(json.dumps(record, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    sys.exit(main())
