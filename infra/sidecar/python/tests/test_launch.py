import sys

import pytest

from trainscaler_hook import launch, leaving
from trainscaler_hook.leaving import LEAVING_ENV


class FakeExecutor:
    def __init__(self, error=None):
        self.runs = []
        self.error = error

    def run(self, op, deadline):
        self.runs.append((op, deadline))
        if self.error:
            raise self.error


class FakeHandler:
    def __init__(self, executor):
        self._op_executor = executor
        self.heartbeats_stopped = False

    def _stop_heartbeats(self):
        self.heartbeats_stopped = True


def test_graceful_leave_stops_heartbeats_and_runs_the_exit_operation_with_a_deadline():
    executor = FakeExecutor()
    handler = FakeHandler(executor)
    exit_op = object()
    assert launch.graceful_leave(handler, exit_op, seconds=5) is True
    assert handler.heartbeats_stopped
    assert len(executor.runs) == 1 and executor.runs[0][0] is exit_op


def test_graceful_leave_without_torchs_private_executor_leaves_the_old_way():
    assert launch.graceful_leave(object(), object()) is False


def test_graceful_leave_survives_a_store_that_is_gone(capsys):
    handler = FakeHandler(FakeExecutor(error=RuntimeError("connection reset")))
    assert launch.graceful_leave(handler, object()) is False
    assert "connection reset" in capsys.readouterr().err


def test_the_workers_command_goes_through_the_warm_stub():
    assert launch.warm_worker_args(sys.executable, ["-u", "train.py", "--x"]) == [
        "-u",
        "-m",
        "trainscaler_hook.warm",
        "train.py",
        "--x",
    ]


@pytest.mark.parametrize(
    "cmd,args",
    [
        ("/usr/bin/other-python", ["-u", "train.py"]),  # --no_python or another interpreter
        (sys.executable, ["-u", "-m", "pkg.train"]),  # --module
        (sys.executable, ["train.py"]),
    ],
)
def test_other_worker_commands_are_left_alone(cmd, args):
    assert launch.warm_worker_args(cmd, args) is None


def test_leaving_is_true_once_the_launcher_marked_it(tmp_path, monkeypatch):
    marker = tmp_path / "leaving"
    monkeypatch.delenv(LEAVING_ENV, raising=False)
    assert leaving() is False, "plain torchrun: never leaving"
    monkeypatch.setenv(LEAVING_ENV, str(marker))
    assert leaving() is False
    launch.mark_leaving(str(marker))
    assert leaving() is True


def test_only_the_one_second_state_poll_is_shortened():
    slept = []
    delay = launch.poll_delay(slept.append, 0.1)
    delay(1)
    delay((0, 0.3))
    delay(2)
    assert slept == [0.1, (0, 0.3), 2]


def test_the_state_cache_follows_the_poll_interval_when_torch_has_one():
    class Holder:
        _cache_duration = 1

    class Handler:
        _state_holder = Holder()

    handler = Handler()
    assert launch.poll_faster(handler, 0.1) is True
    assert handler._state_holder._cache_duration == 0.1
    assert launch.poll_faster(object(), 0.1) is False


def test_each_rendezvous_is_timed_and_its_result_passed_through(capsys):
    class Handler:
        def next_rendezvous(self):
            return ("store", 1, 2)

    handler = Handler()
    launch.timed_rendezvous(handler)
    assert handler.next_rendezvous() == ("store", 1, 2)
    assert "rank 1 of 2 nodes" in capsys.readouterr().err


@pytest.fixture
def hook_on_pythonpath(monkeypatch):
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", root)


def test_the_warm_server_is_started_and_ready_before_the_agent_runs(tmp_path, monkeypatch, hook_on_pythonpath):
    monkeypatch.setenv("TRAINSCALER_WARM_PRELOAD", "json")
    path = tmp_path / "warm.sock"
    server = launch._start_warm_server(str(path))
    try:
        assert server is not None and server.poll() is None
        assert path.exists(), "listening before the agent starts any worker"
    finally:
        server.terminate()
        server.wait(10)


def test_a_warm_server_that_cannot_warm_up_means_cold_starts_not_a_failed_pod(tmp_path, monkeypatch, hook_on_pythonpath):
    monkeypatch.setenv("TRAINSCALER_WARM_PRELOAD", "no_such_module_anywhere")
    assert launch._start_warm_server(str(tmp_path / "warm.sock")) is None


def test_a_torch_2_rendezvous_info_is_timed_and_passed_through(capsys):
    class RendezvousInfo:  # torch 2's next_rendezvous() result: properties, not a tuple
        rank = 0
        world_size = 3

    info = RendezvousInfo()

    class Handler:
        def next_rendezvous(self):
            return info

    handler = Handler()
    launch.timed_rendezvous(handler)
    assert handler.next_rendezvous() is info
    assert "rank 0 of 3 nodes" in capsys.readouterr().err
