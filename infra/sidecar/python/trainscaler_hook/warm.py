"""Warm worker starts: a torchelastic worker forked from a process that has already imported torch.

Every rescale of a torchelastic job ends with the agent starting a fresh worker process, which then spends
seconds importing torch before it can take its first step (measured by ``npm run bench:rescale``: the largest
part of a scale-up pause). Here one process per pod (the *warm server*, started by ``trainscaler_hook.launch``
before the agent joins the rendezvous) imports the heavy modules once; the agent's worker command becomes a
tiny *stub* (standard library only, starts in tens of ms) that asks the server for a fork, hands it its
stdin/stdout/stderr, environment, arguments and working directory, forwards the agent's signals to it and exits
with its status. The idea is the zygote of Android and multiprocessing's ``forkserver``.

    python -m trainscaler_hook.warm serve SOCKET     # the warm server (the launcher starts it)
    python -m trainscaler_hook.warm SCRIPT [ARGS]    # the stub: runs SCRIPT in a fork of the server

The stub runs SCRIPT in its own process when no server answers (``TRAINSCALER_WARM_SOCKET`` unset or nobody
listening), so the worker starts either way. The server stays single-threaded (fork is only safe there), and
preloads the modules named in ``TRAINSCALER_WARM_PRELOAD`` (comma-separated, ``name?`` when optional; default
``torch,torch._dynamo?``). A fork whose
stub dies (the agent SIGKILLed it) is killed; the server exits, killing its forks, when its parent (the agent)
is gone.
"""

import array
import atexit
import importlib
import io
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import time
import traceback
from typing import Dict, List, Optional, Tuple

SOCKET_ENV = "TRAINSCALER_WARM_SOCKET"
PRELOAD_ENV = "TRAINSCALER_WARM_PRELOAD"
# A name ending in "?" is preloaded when it exists. torch 2's optimizers import torch._dynamo when the first one
# is made (measured on torch 2.15.0: 8 s on a loaded machine, the largest part of a rescale pause); torch 1.13
# has none.
OPTIONAL = "?"
DEFAULT_PRELOAD = "torch,torch._dynamo?"
# When the agent started this worker (epoch seconds): the stub's start, which a warm fork would otherwise hide.
STARTED_ENV = "TRAINSCALER_PROCESS_STARTED"
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
_HEADER = struct.Struct("!I")


# -- wire format: a length-prefixed JSON request carrying three file descriptors, then JSON lines back ----------


def _send_request(sock: socket.socket, request: dict, fds: List[int]) -> None:
    body = json.dumps(request).encode("utf-8")
    sock.sendmsg([_HEADER.pack(len(body))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    sock.sendall(body)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("warm stub hung up mid-request")
        data += chunk
    return data


def _recv_request(sock: socket.socket) -> Tuple[dict, List[int]]:
    header, ancillary, _flags, _addr = sock.recvmsg(_HEADER.size, socket.CMSG_SPACE(3 * array.array("i").itemsize))
    fds: List[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            received = array.array("i")
            received.frombytes(data[: len(data) - (len(data) % received.itemsize)])
            fds.extend(received)
    if len(header) < _HEADER.size:
        header += _recv_exact(sock, _HEADER.size - len(header))
    (size,) = _HEADER.unpack(header)
    return json.loads(_recv_exact(sock, size).decode("utf-8")), fds


def exit_code(wait_status: int) -> int:
    """A wait status as subprocess reports it: the exit code, or minus the signal that killed the process."""
    if os.WIFSIGNALED(wait_status):
        return -os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


# -- the fork: becomes the worker the agent asked for ------------------------------------------------------------


def _system_exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def wait_for_store(env: Dict[str, str], seconds: float = 30.0, poll: float = 0.02) -> bool:
    """A rank other than 0 waits until rank 0's TCPStore (MASTER_ADDR:MASTER_PORT) accepts connections.

    Warm workers start within milliseconds of each other, and a rank that connects before rank 0 has bound
    the store retries only after a full second (torch 1.13's TCPStore client): measured as a 1 s pause of
    every scale-up. Polling the port first costs nothing when it is already open. False on timeout (the
    store's own connect then decides).
    """
    host, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if env.get("RANK", "0") == "0" or not host or not port or not port.isdigit():
        return True
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=poll * 10).close()
            return True
        except OSError:
            time.sleep(poll)
    return False


def _become_worker(request: dict, fds: List[int]) -> int:
    """In the fork: take the stub's stdio, environment, directory and arguments, run the script as __main__."""
    for sig in FORWARDED_SIGNALS + (signal.SIGCHLD,):
        signal.signal(sig, signal.SIG_DFL)
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    script = request["argv"][0]
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    threads = os.environ.get("OMP_NUM_THREADS")
    torch = sys.modules.get("torch")
    if threads and torch is not None:
        # OpenMP read its thread count when the server loaded it; the worker's environment decides.
        torch.set_num_threads(int(threads))
    wait_for_store(os.environ)
    try:
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as stop:
        code = _system_exit_code(stop.code)
    except BaseException:  # the worker's own crash: report it as python would, exit 1
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    return code


# -- the server --------------------------------------------------------------------------------------------------


class WarmServer:
    """Accepts stub connections on a unix socket and forks one worker per connection (single-threaded)."""

    def __init__(self, path: str, preload: List[str], parent: Optional[int] = None) -> None:
        self.path = path
        self.preload = preload
        self.parent = parent if parent is not None else os.getppid()
        self.children: Dict[int, socket.socket] = {}  # pid -> its stub's connection
        self.selector = selectors.DefaultSelector()
        self.listener: Optional[socket.socket] = None
        self.stopping = False

    def _stop(self, _signum, _frame) -> None:
        # A pod's SIGTERM may reach the whole process group: serve no more, but let the workers finish their
        # step-boundary stop and report their exit to their stubs first.
        self.stopping = True

    def bind(self) -> None:
        # Bound before the preload: a stub connecting early waits in the backlog instead of starting cold.
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(16)
        self.selector.register(self.listener, selectors.EVENT_READ)

    def warm_up(self) -> None:
        for name in self.preload:
            optional = name.endswith(OPTIONAL)
            try:
                importlib.import_module(name[: -len(OPTIONAL)] if optional else name)
            except ImportError:
                if not optional:
                    raise

    def serve(self, ready: Optional[io.TextIOBase] = None, max_seconds: Optional[float] = None) -> None:
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        self.bind()
        self.warm_up()
        if ready is not None:
            ready.write("ready\n")
            ready.flush()
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        try:
            while os.getppid() == self.parent and (deadline is None or time.monotonic() < deadline):
                if self.stopping:
                    if not self.children:
                        return
                    if self.listener is not None and self.listener in self.selector.get_map():
                        self.selector.unregister(self.listener)
                for key, _events in self.selector.select(timeout=0.05):
                    if key.fileobj is self.listener:
                        self._accept()
                    else:
                        self._stub_event(key.fileobj)  # type: ignore[arg-type]
                self._reap()
        finally:
            self.close()

    def _accept(self) -> None:
        assert self.listener is not None
        conn, _ = self.listener.accept()
        try:
            request, fds = _recv_request(conn)
        except (OSError, ValueError):
            conn.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                self.selector.close()
                if self.listener is not None:
                    self.listener.close()
                for other in self.children.values():
                    other.close()
                conn.close()
                code = _become_worker(request, fds)
            finally:
                os._exit(code & 0xFF)
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn
        self.selector.register(conn, selectors.EVENT_READ, pid)
        try:
            conn.sendall((json.dumps({"pid": pid}) + "\n").encode())
        except OSError:
            os.kill(pid, signal.SIGKILL)

    def _stub_event(self, conn: socket.socket) -> None:
        # A stub only ever hangs up: if it died (SIGKILL by the agent), its worker must not outlive it.
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        if data:
            return
        pid = self.selector.get_key(conn).data
        self.selector.unregister(conn)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            try:
                conn.sendall((json.dumps({"status": exit_code(status)}) + "\n").encode())
            except OSError:
                pass
            try:
                self.selector.unregister(conn)
            except (KeyError, ValueError):
                pass
            conn.close()

    def close(self) -> None:
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.children.clear()
        if self.listener is not None:
            self.listener.close()
            self.listener = None
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


def preload_from_env() -> List[str]:
    return [name.strip() for name in os.environ.get(PRELOAD_ENV, DEFAULT_PRELOAD).split(",") if name.strip()]


# -- the stub: what the agent starts ----------------------------------------------------------------------------


def _connect(path: str) -> Optional[socket.socket]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


class _LineReader:
    """JSON lines from the server, read straight off the socket so a select() can wait on it beside the signals."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def pending(self) -> Optional[dict]:
        line, newline, rest = self.buffer.partition(b"\n")
        if not newline:
            return None
        self.buffer = rest
        return json.loads(line)

    def fill(self) -> bool:
        """One read from the socket; False when the server hung up."""
        data = self.sock.recv(4096)
        self.buffer += data
        return bool(data)

    def next_line(self) -> Optional[dict]:
        while True:
            line = self.pending()
            if line is not None or not self.fill():
                return line


def _note_signal(_signum, _frame) -> None:
    # The forwarding happens in the stub's wait loop, woken by the byte the C-level handler writes to the
    # wakeup pipe. A Python handler alone runs only between bytecodes: a signal landing just before a blocking
    # recv() would wait for the recv to return, that is for the worker to exit, and never be forwarded.
    pass


def _wait_forwarding(lines: _LineReader, wake: int, worker: int) -> Optional[dict]:
    """Wait for the server's next line, forwarding every signal that arrives meanwhile to ``worker``."""
    with selectors.DefaultSelector() as selector:
        selector.register(lines.sock, selectors.EVENT_READ)
        selector.register(wake, selectors.EVENT_READ)
        while True:
            line = lines.pending()
            if line is not None:
                return line
            for key, _events in selector.select():
                if key.fileobj == wake:
                    for signum in os.read(wake, 64):
                        if signum in FORWARDED_SIGNALS:
                            try:
                                os.kill(worker, signum)
                            except ProcessLookupError:
                                pass
                elif not lines.fill():
                    return lines.pending()


def run_stub(argv: List[str]) -> int:
    """Run ``argv`` (script, args) in a fork of the warm server; in this process when there is none."""
    if not argv:
        raise SystemExit("usage: python -m trainscaler_hook.warm SCRIPT [ARGS...]")
    os.environ.setdefault(STARTED_ENV, repr(time.time()))
    path = os.environ.get(SOCKET_ENV)
    sock = _connect(path) if path else None
    if sock is None:
        return _run_here(argv)
    # Signals that arrive before the worker exists stay blocked, pending in the kernel, and are delivered once
    # its pid is known: a SIGTERM from an agent re-forming the world right now must still let the worker stop at
    # a step boundary. The kernel's mask, not a Python list, so no handler timing can lose one.
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, _note_signal)
    request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
    _send_request(sock, request, [0, 1, 2])
    lines = _LineReader(sock)
    hello = lines.next_line()
    if hello is None:
        raise SystemExit("trainscaler warm server hung up before starting the worker")
    worker = int(hello["pid"])
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)
    answer = _wait_forwarding(lines, wake_read, worker)
    if answer is None:
        raise SystemExit("trainscaler warm server hung up before the worker exited")
    code = int(answer["status"])
    if code < 0:  # killed by a signal: die of the same one, so the agent sees what it would have seen
        try:
            signal.signal(-code, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL, SIGSTOP: cannot be caught anyway
        os.kill(os.getpid(), -code)
    return code


def _run_here(argv: List[str]) -> int:
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as stop:
        return _system_exit_code(stop.code)
    return 0


def main(argv: List[str]) -> int:
    if argv[:1] == ["serve"]:
        if len(argv) != 2:
            raise SystemExit("usage: python -m trainscaler_hook.warm serve SOCKET")
        WarmServer(argv[1], preload_from_env()).serve(ready=sys.stdout)
        return 0
    return run_stub(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
