import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from trainscaler_hook import warm

PACKAGE_ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys, time
    mode = sys.argv[1]
    if mode == "term":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "foo": os.environ.get("FOO"),
                      "json_preloaded": "json" in sys.modules, "pid": os.getpid()}), flush=True)
    if mode == "exit":
        sys.exit(int(sys.argv[2]))
    if mode == "raise":
        raise RuntimeError("the worker's own crash")
    if mode in ("term", "sleep"):
        # Training steps, not one long sleep: Python runs a signal handler between bytecodes, so a SIGTERM
        # landing just before a 60 s sleep would wait for it, as it waits for a step in a real worker.
        for _ in range(600):
            time.sleep(0.1)
    """
)


def env_with(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PACKAGE_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "script.py").write_text(SCRIPT)
    return tmp_path


def start_server(path, preload):
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainscaler_hook.warm", "serve", path],
        stdout=subprocess.PIPE,
        text=True,
        env=env_with(TRAINSCALER_WARM_PRELOAD=preload),
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.fixture
def server(workdir):
    path = str(workdir / "warm.sock")
    proc = start_server(path, "json")
    yield path
    proc.terminate()
    proc.wait(10)


def stub(workdir, *args, socket_path=None, **kwargs):
    env = env_with(FOO="bar")
    if socket_path:
        env[warm.SOCKET_ENV] = socket_path
    return subprocess.Popen(
        [sys.executable, "-u", "-m", "trainscaler_hook.warm", "script.py", *args],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def first_line(proc):
    return json.loads(proc.stdout.readline())


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie child of the server counts as gone
    try:
        return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") < 0
    except FileNotFoundError:
        return False


def test_the_worker_runs_in_a_fork_of_the_warm_server_with_the_stubs_args_env_cwd_and_stdio(workdir, server):
    proc = stub(workdir, "exit", "3", socket_path=server)
    seen = first_line(proc)
    assert proc.wait(20) == 3
    assert seen["argv"] == ["exit", "3"]
    assert seen["foo"] == "bar"
    assert seen["cwd"] == str(workdir)
    assert seen["pid"] != proc.pid, "the worker is the server's fork, not the stub"


def test_a_crash_in_the_worker_is_printed_and_exits_1(workdir, server):
    proc = stub(workdir, "raise", socket_path=server)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert "the worker's own crash" in err


def signal_state(pid):
    """The kernel's view of a process's signals, for a failure message (a hang says nothing by itself)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except FileNotFoundError:
        return f"{pid}: gone"
    keep = ("State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
    return f"{pid}: " + ", ".join(line.replace("\t", " ") for line in lines if line.split(":")[0] in keep)


def wait_explained(proc, seconds, *others):
    try:
        return proc.wait(seconds)
    except subprocess.TimeoutExpired:
        states = "; ".join(signal_state(pid) for pid in (proc.pid, *others))
        proc.kill()
        raise AssertionError(f"still running after {seconds} s: {states}") from None


def test_the_agents_sigterm_reaches_the_worker_and_its_exit_code_comes_back(workdir, server):
    proc = stub(workdir, "term", socket_path=server)
    worker = first_line(proc)["pid"]
    proc.send_signal(signal.SIGTERM)
    assert wait_explained(proc, 20, worker) == 7


def test_a_sigterm_before_the_worker_exists_is_delivered_to_it_once_it_does(workdir):
    # A stand-in for the server that answers late, so the agent's SIGTERM reaches the stub first.
    path = str(workdir / "late.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    proc = stub(workdir, "term", socket_path=path)
    conn, _ = listener.accept()
    conn.recv(1 << 16)  # the request (and its descriptors, closed with the socket)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    assert proc.poll() is None, "the stub keeps the signal for its worker instead of dying of it"
    marker = workdir / "got-term"
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import pathlib, signal, sys, time\n"
            f"signal.signal(signal.SIGTERM, lambda *_: (pathlib.Path({str(marker)!r}).touch(), sys.exit(0)))\n"
            "print('armed', flush=True)\n"
            "for _ in range(300): time.sleep(0.1)\n",  # steps, as in SCRIPT
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout.readline().strip() == "armed"
    conn.sendall((json.dumps({"pid": worker.pid}) + "\n").encode())
    assert wait_explained(worker, 20, proc.pid) == 0 and marker.exists(), "the kept SIGTERM reached the worker"
    conn.sendall((json.dumps({"status": 7}) + "\n").encode())
    assert wait_explained(proc, 20) == 7
    conn.close()
    listener.close()


def test_a_worker_killed_by_a_signal_kills_its_stub_with_the_same_signal(workdir, server):
    proc = stub(workdir, "sleep", socket_path=server)
    worker = first_line(proc)["pid"]
    os.kill(worker, signal.SIGKILL)
    assert proc.wait(20) == -signal.SIGKILL


def test_a_stub_killed_by_the_agent_takes_its_worker_with_it(workdir, server):
    proc = stub(workdir, "sleep", socket_path=server)
    worker = first_line(proc)["pid"]
    proc.kill()
    proc.wait(20)
    deadline = time.monotonic() + 10
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(worker)


def test_without_a_server_the_stub_runs_the_script_itself(workdir):
    proc = stub(workdir, "exit", "4", socket_path=str(workdir / "nobody.sock"))
    seen = first_line(proc)
    assert proc.wait(20) == 4
    assert seen["pid"] == proc.pid
    assert seen["json_preloaded"] is True  # the stub itself imports json; the point is it ran at all


def test_the_server_exits_and_kills_its_workers_when_its_parent_is_gone(workdir):
    path = str(workdir / "orphan.sock")
    # a parent that starts the server and exits at once
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys; p = subprocess.Popen([sys.executable, '-m', 'trainscaler_hook.warm', 'serve', "
            f"{path!r}], stdout=subprocess.PIPE, text=True); print(p.stdout.readline().strip(), p.pid, flush=True)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env_with(TRAINSCALER_WARM_PRELOAD=""),
    )
    ready, server_pid = launcher.stdout.readline().split()
    launcher.wait(20)
    assert ready == "ready"
    deadline = time.monotonic() + 10
    while alive(int(server_pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(int(server_pid))


def test_a_sigterm_to_the_server_lets_running_workers_finish_then_it_exits(workdir):
    path = str(workdir / "term.sock")
    server = start_server(path, "")
    proc = stub(workdir, "term", socket_path=path)
    first_line(proc)
    server.send_signal(signal.SIGTERM)  # a pod's SIGTERM to the whole process group reaches both
    time.sleep(0.3)
    assert server.poll() is None, "the server waits for its worker"
    proc.send_signal(signal.SIGTERM)
    assert wait_explained(proc, 20) == 7, "the worker's own exit code still reaches its stub"
    assert server.wait(20) == 0


def test_exit_code_is_what_subprocess_reports():
    assert warm.exit_code(3 << 8) == 3
    assert warm.exit_code(signal.SIGKILL) == -signal.SIGKILL


def test_preload_list_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(warm.PRELOAD_ENV, " torch , numpy,,")
    assert warm.preload_from_env() == ["torch", "numpy"]
    monkeypatch.delenv(warm.PRELOAD_ENV)
    assert warm.preload_from_env() == ["torch", "torch._dynamo?"]


def test_an_optional_preload_that_does_not_exist_is_skipped_and_a_required_one_fails(tmp_path):
    server = warm.WarmServer(str(tmp_path / "a.sock"), ["json", "no_such_module_anywhere?"])
    server.warm_up()
    assert "json" in sys.modules
    with pytest.raises(ImportError):
        warm.WarmServer(str(tmp_path / "b.sock"), ["no_such_module_anywhere"]).warm_up()


def test_a_later_rank_waits_for_rank_0s_store_port_and_rank_0_does_not():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    env = {"RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    assert warm.wait_for_store(env, seconds=0.3) is False, "nobody listens yet"
    listener.listen(1)
    assert warm.wait_for_store(env, seconds=5) is True
    listener.close()
    assert warm.wait_for_store({**env, "RANK": "0"}, seconds=0.3) is True
    assert warm.wait_for_store({"RANK": "1"}, seconds=0.3) is True, "no store to wait for"
