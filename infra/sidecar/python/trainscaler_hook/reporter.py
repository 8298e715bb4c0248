"""The reporter behind trainscaler_hook: a coalescing, non-blocking progress sender."""

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from typing import Callable, Dict, Optional, Union

DEFAULT_URL = "http://127.0.0.1:9471"

_log = logging.getLogger("trainscaler_hook")

Number = Union[int, float]


def _check_count(name: str, value: Optional[Number], positive_int: bool = False) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")
    if positive_int and (int(value) != value or value == 0):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


class Reporter:
    """Sends the latest cumulative progress to the sidecar from a daemon thread.

    Counts are cumulative (steps done so far, samples processed so far by this worker), so reports can be
    coalesced and a lost post loses nothing: the next one carries the totals. Between reports the thread
    still polls GET /drain, so a trainer stuck in a long step learns of a drain request all the same.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        interval: float = 1.0,
        timeout: float = 2.0,
        on_drain: Optional[Callable[[], None]] = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if interval <= 0 or timeout <= 0:
            raise ValueError("interval and timeout must be positive")
        self.url = (url or os.environ.get("TRAINSCALER_HOOK_URL") or DEFAULT_URL).rstrip("/")
        self.interval = interval
        self.timeout = timeout
        self.on_drain = on_drain
        self._clock = clock
        self._lock = threading.Lock()
        # One post at a time, in order: an older total arriving after a newer one would look like a restart.
        self._send_lock = threading.Lock()
        self._pending: Optional[Dict[str, Number]] = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._drain = threading.Event()
        self._drain_notified = False
        self._thread: Optional[threading.Thread] = None
        self.posts = 0
        self.failures = 0

    # -- the training loop's side: cheap, never blocks on the network -----------------------------------

    def report(
        self,
        step: Number,
        samples: Optional[Number] = None,
        *,
        replicas: Optional[int] = None,
        nodes: Optional[int] = None,
        local_batch_size: Optional[int] = None,
    ) -> None:
        """Record that `step` steps (and `samples` samples, if given) are done so far by this worker.

        replicas / nodes / local_batch_size describe the job's current scale when it differs from the pod's
        environment (an elastic job resized without restarting this pod).
        """
        _check_count("step", step)
        _check_count("samples", samples)
        _check_count("replicas", replicas, positive_int=True)
        _check_count("nodes", nodes, positive_int=True)
        _check_count("local_batch_size", local_batch_size, positive_int=True)
        body: Dict[str, Number] = {"step": step, "at": self._clock()}
        if samples is not None:
            body["samples"] = samples
        for key, value in (("replicas", replicas), ("nodes", nodes), ("local_batch_size", local_batch_size)):
            if value is not None:
                body[key] = int(value)
        with self._lock:
            self._pending = body
        self._ensure_thread()

    def should_checkpoint(self) -> bool:
        """True once the sidecar has asked the trainer to checkpoint (the pod is stopping)."""
        self._ensure_thread()
        return self._drain.is_set()

    def checkpoint_done(self) -> bool:
        """Tell the sidecar the checkpoint is saved, so the pod may stop now. Synchronous; False on failure."""
        self.flush()
        return self._post("/checkpointed", {}) is not None

    def flush(self) -> bool:
        """Send the latest report now, from the caller's thread. False when the sidecar could not be reached."""
        with self._send_lock:
            with self._lock:
                body, self._pending = self._pending, None
            if body is None:
                return True
            answer = self._post("/progress", body)
            if answer is None:
                with self._lock:
                    if self._pending is None:
                        self._pending = body  # keep it for the next try; newer totals supersede it
                return False
            return True

    def close(self, timeout: float = 2.0) -> None:
        """Flush and stop the background thread."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.flush()

    # -- the background thread --------------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            if self._stop.is_set():
                return
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, name="trainscaler-hook", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            with self._lock:
                has_pending = self._pending is not None
            if has_pending:
                self.flush()
            else:
                self._get("/drain")

    def _post(self, path: str, body: Dict[str, Number]) -> Optional[dict]:
        data = json.dumps(body).encode("utf-8")
        request = urllib.request.Request(
            self.url + path, data=data, method="POST", headers={"content-type": "application/json"}
        )
        return self._send(request)

    def _get(self, path: str) -> Optional[dict]:
        return self._send(urllib.request.Request(self.url + path, method="GET"))

    def _send(self, request: urllib.request.Request) -> Optional[dict]:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                answer = json.loads(response.read().decode("utf-8") or "{}")
        except (urllib.error.URLError, OSError, ValueError) as error:
            self.failures += 1
            _log.debug("trainscaler sidecar unreachable at %s: %s", request.full_url, error)
            return None
        self.posts += 1
        if isinstance(answer, dict) and answer.get("drain") is True:
            self._on_drain()
        return answer if isinstance(answer, dict) else {}

    def _on_drain(self) -> None:
        self._drain.set()
        callback = None
        with self._lock:
            if not self._drain_notified:
                self._drain_notified = True
                callback = self.on_drain
        if callback is not None:
            try:
                callback()
            except Exception:  # a failing user callback must not kill the reporting thread
                _log.exception("trainscaler on_drain callback failed")


_default: Optional[Reporter] = None
_default_lock = threading.Lock()


def default_reporter() -> Reporter:
    """The process-wide reporter the module-level functions use (configured from the environment)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Reporter(interval=float(os.environ.get("TRAINSCALER_HOOK_INTERVAL", "1.0")))
        return _default


def report(step: Number, samples: Optional[Number] = None, **shape: Optional[int]) -> None:
    default_reporter().report(step, samples, **shape)


def should_checkpoint() -> bool:
    return default_reporter().should_checkpoint()


def checkpoint_done() -> bool:
    return default_reporter().checkpoint_done()


def flush() -> bool:
    return default_reporter().flush()
