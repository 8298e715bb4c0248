import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class FakeSidecar:
    """The sidecar's hook API as the reporter sees it, recording what it receives."""

    def __init__(self) -> None:
        self.reports = []
        self.checkpointed = 0
        self.drain_polls = 0
        self.drain = False
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def _answer(self, status=200):
                body = json.dumps({"drain": fake.drain, "acknowledged": fake.checkpointed > 0}).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake.lock:
                    if self.path == "/progress":
                        fake.reports.append(body)
                    elif self.path == "/checkpointed":
                        fake.checkpointed += 1
                self._answer()

            def do_GET(self):
                with fake.lock:
                    fake.drain_polls += 1
                self._answer()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sidecar():
    fake = FakeSidecar()
    yield fake
    fake.close()


def wait_for(predicate, timeout=5.0, interval=0.02):
    """Polls predicate until true or the timeout: bounded in time, never loops forever."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
