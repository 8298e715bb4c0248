import socket
import time

import pytest
from conftest import wait_for

from trainscaler_hook import Reporter


def test_coalesces_many_reports_into_few_posts_with_the_latest_totals(sidecar):
    reporter = Reporter(sidecar.url, interval=0.2)
    try:
        for step in range(1, 5001):
            reporter.report(step, samples=step * 32)
        assert wait_for(lambda: sidecar.reports and sidecar.reports[-1]["step"] == 5000)
        last = sidecar.reports[-1]
        assert last["samples"] == 5000 * 32
        assert abs(last["at"] - time.time()) < 5
        # 5,000 reports in a tight loop must not turn into 5,000 HTTP posts.
        assert len(sidecar.reports) < 20
        steps = [r["step"] for r in sidecar.reports]
        assert steps == sorted(steps), "totals must arrive in order, or the sidecar sees a restart"
    finally:
        reporter.close()


def test_sends_the_job_scale_only_when_given(sidecar):
    reporter = Reporter(sidecar.url, interval=10)
    try:
        reporter.report(10)
        assert reporter.flush()
        reporter.report(20, 640, replicas=4, nodes=2, local_batch_size=32)
        assert reporter.flush()
        first, second = sidecar.reports
        assert set(first) == {"step", "at"}
        assert second["replicas"] == 4 and second["nodes"] == 2 and second["local_batch_size"] == 32
    finally:
        reporter.close()


def test_learns_of_a_drain_from_polling_and_acknowledges_the_checkpoint(sidecar):
    called = []
    reporter = Reporter(sidecar.url, interval=0.05, on_drain=lambda: called.append(1))
    try:
        assert reporter.should_checkpoint() is False  # starts the thread, which polls GET /drain
        assert wait_for(lambda: sidecar.drain_polls > 0)
        sidecar.drain = True
        assert wait_for(reporter.should_checkpoint)
        assert wait_for(lambda: called == [1])
        time.sleep(0.2)
        assert called == [1], "on_drain is called once, however many answers say drain"
        assert reporter.checkpoint_done() is True
        assert sidecar.checkpointed == 1
    finally:
        reporter.close()


def test_an_unreachable_sidecar_never_breaks_training():
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    reporter = Reporter(f"http://127.0.0.1:{port}", interval=0.05, timeout=0.5)
    try:
        for step in range(100):
            reporter.report(step)
        assert reporter.flush() is False
        assert wait_for(lambda: reporter.failures >= 2)
        assert reporter.should_checkpoint() is False
        assert reporter.checkpoint_done() is False
    finally:
        reporter.close(timeout=1)


def test_keeps_an_unsent_report_for_the_next_try(sidecar):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    reporter = Reporter(dead, interval=60, timeout=0.5)
    reporter.report(7, 224)
    assert reporter.flush() is False
    reporter.url = sidecar.url  # the sidecar comes up
    assert reporter.flush() is True
    assert sidecar.reports[-1]["step"] == 7 and sidecar.reports[-1]["samples"] == 224
    reporter.close()


@pytest.mark.parametrize(
    "args, kwargs",
    [((-1,), {}), ((float("nan"),), {}), ((1, -5), {}), ((1,), {"replicas": 0}), ((1,), {"nodes": 1.5})],
)
def test_rejects_nonsense_counts(args, kwargs):
    reporter = Reporter("http://127.0.0.1:9", interval=60)
    with pytest.raises(ValueError):
        reporter.report(*args, **kwargs)
    reporter.close(timeout=0.1)


def test_module_functions_use_the_url_from_the_environment(sidecar, monkeypatch):
    import trainscaler_hook.reporter as module

    monkeypatch.setenv("TRAINSCALER_HOOK_URL", sidecar.url)
    monkeypatch.setattr(module, "_default", None)
    import trainscaler_hook

    trainscaler_hook.report(3, 96)
    assert trainscaler_hook.flush() is True
    assert sidecar.reports[-1]["step"] == 3
    module.default_reporter().close()
