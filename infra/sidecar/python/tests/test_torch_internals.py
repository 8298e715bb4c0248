"""The launcher's torch internals: checked at start, each feature off (torchrun's behaviour) when one is missing."""

import os
import types

import pytest

from trainscaler_hook import launch, torch_internals
from trainscaler_hook.leaving import LEAVING_ENV
from trainscaler_hook.torch_internals import DYNAMIC, MP_API, REGISTRY, RUN


def fake_torch():
    """Modules shaped as torch 1.13 and 2.x have them (only what the launcher uses)."""

    class SignalException(Exception):
        def __init__(self, msg, sigval):
            super().__init__(msg)

    class Executor:
        def run(self, state_handler, deadline, update_deadline=None):
            pass

    class Handler:
        def _stop_heartbeats(self):
            pass

    class StateHolder:
        def __init__(self, backend, settings, cache_duration=1):
            pass

    class ExitOp:
        pass

    return {
        RUN: types.SimpleNamespace(config_from_args=lambda args: None),
        REGISTRY: types.SimpleNamespace(get_rendezvous_handler=lambda params: None),
        DYNAMIC: types.SimpleNamespace(
            _RendezvousExitOp=ExitOp,
            _DistributedRendezvousOpExecutor=Executor,
            DynamicRendezvousHandler=Handler,
            _BackendRendezvousStateHolder=StateHolder,
            _delay=lambda seconds: None,
        ),
        MP_API: types.SimpleNamespace(SignalException=SignalException, _terminate_process_handler=lambda s, f: None),
    }


def importer(modules):
    def import_module(name):
        if name not in modules:
            raise ImportError(name)
        return modules[name]

    return import_module


def test_every_feature_is_on_when_torch_has_what_the_launcher_calls():
    checked = torch_internals.check(importer(fake_torch()), "x")
    assert checked.warnings == []
    assert checked.on == list(torch_internals.FEATURES)


def test_a_missing_internal_turns_off_only_the_features_that_use_it():
    modules = fake_torch()
    del modules[MP_API]._terminate_process_handler
    checked = torch_internals.check(importer(modules), "9.9")
    assert "leaving marker" not in checked.on
    assert "graceful leave" in checked.on and "warm worker starts" in checked.on
    [warning] = checked.warnings
    assert "leaving marker off" in warning and "_terminate_process_handler is missing" in warning and "9.9" in warning


def test_an_internal_whose_signature_changed_counts_as_missing():
    modules = fake_torch()
    modules[DYNAMIC]._delay = lambda delay: None  # torch calls _delay(seconds=...): the replacement would break
    checked = torch_internals.check(importer(modules))
    assert "fast rendezvous polling" not in checked.on
    assert "cannot be called as the launcher does" in checked.warnings[0]


def test_a_missing_module_turns_off_its_features():
    modules = fake_torch()
    del modules[REGISTRY]
    checked = torch_internals.check(importer(modules))
    assert checked.on == ["leaving marker", "warm worker starts"]
    assert len(checked.warnings) == 3


# -- against the installed torch (skipped where there is none): npm run test:hook runs these under torch 1.13 and
# the pinned PyPI release.


@pytest.fixture
def real_torch(monkeypatch):
    """The installed torch's launcher modules; whatever a test patches in them is restored afterwards.

    Skipped without torch, unless TRAINSCALER_REQUIRE_TORCH is set (npm run test:hook: each torch must be checked).
    """
    if os.environ.get("TRAINSCALER_REQUIRE_TORCH"):
        import torch  # noqa: F401 (an ImportError fails the test)
    pytest.importorskip("torch")
    import torch.distributed.elastic.multiprocessing.api as mp_api
    import torch.distributed.elastic.rendezvous.dynamic_rendezvous as dynamic
    import torch.distributed.elastic.rendezvous.registry as registry
    import torch.distributed.run as run

    for module, name in [
        (registry, "get_rendezvous_handler"),
        (mp_api, "_terminate_process_handler"),
        (run, "config_from_args"),
        (run, "main"),
        (dynamic, "_delay"),
    ]:
        monkeypatch.setattr(module, name, getattr(module, name))
    for name in (LEAVING_ENV, launch.NO_SHARED_STORE_ENV):  # set first, so that the delete is undone too
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setenv(launch.WARM_ENV, "0")
    return types.SimpleNamespace(mp_api=mp_api, registry=registry, run=run, dynamic=dynamic)


def test_the_installed_torch_has_every_internal_the_launcher_uses(real_torch):
    import torch

    checked = torch_internals.check(version=torch.__version__)
    assert checked.warnings == [], f"torch {torch.__version__}"


def test_without_an_internal_the_launcher_warns_and_leaves_that_part_of_torchrun_alone(real_torch, monkeypatch, capsys):
    original_terminate = real_torch.mp_api._terminate_process_handler
    monkeypatch.delattr(real_torch.mp_api, "_terminate_process_handler")
    features = launch.supported_features()
    assert "leaving marker" not in features and "graceful leave" in features
    assert "leaving marker off" in capsys.readouterr().err
    monkeypatch.setattr(real_torch.mp_api, "_terminate_process_handler", original_terminate, raising=False)
    original_handler = real_torch.registry.get_rendezvous_handler
    launch._patch_torch(features, {}, "/nonexistent/leaving", 0.1)
    assert real_torch.mp_api._terminate_process_handler is original_terminate
    assert real_torch.registry.get_rendezvous_handler is not original_handler, "the other features still apply"


def test_with_no_usable_internal_the_launcher_is_plain_torchrun(real_torch, monkeypatch):
    """Nothing patched, no leaving marker offered, torch's SignalException passed through without a leave."""
    from torch.distributed.elastic.multiprocessing.api import SignalException

    originals = [
        real_torch.registry.get_rendezvous_handler,
        real_torch.mp_api._terminate_process_handler,
        real_torch.run.config_from_args,
        real_torch.dynamic._delay,
    ]
    monkeypatch.setattr(launch, "supported_features", lambda: [])
    left = []
    monkeypatch.setattr(launch, "graceful_leave", lambda *args: left.append(args))
    seen = {}

    def torchrun_main(argv):
        seen["leaving"] = os.environ.get(LEAVING_ENV)
        seen["untouched"] = [
            real_torch.registry.get_rendezvous_handler,
            real_torch.mp_api._terminate_process_handler,
            real_torch.run.config_from_args,
            real_torch.dynamic._delay,
        ] == originals
        raise SignalException("stopped", 15)

    monkeypatch.setattr(real_torch.run, "main", torchrun_main)
    with pytest.raises(SignalException):
        launch.main(["train.py"])
    assert seen == {"leaving": None, "untouched": True}
    assert left == []


def test_the_launcher_opts_out_of_torch_2s_shared_store_unless_the_job_chose(real_torch, monkeypatch):
    """Without the opt-out, a node joining a later round (a scale-up) never gets the store's address (torch 2.15)."""
    seen = []
    monkeypatch.setattr(launch, "supported_features", lambda: [])
    monkeypatch.setattr(real_torch.run, "main", lambda argv: seen.append(os.environ.get(launch.NO_SHARED_STORE_ENV)))
    launch.main(["train.py"])
    monkeypatch.setenv(launch.NO_SHARED_STORE_ENV, "0")
    launch.main(["train.py"])
    assert seen == ["1", "0"]
