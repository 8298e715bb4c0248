"""The torch internals ``trainscaler_hook.launch`` relies on, checked at start against the installed torch.

Each feature of the launcher names what it replaces or calls inside torch.distributed (module, attribute, and
how the launcher calls it). A feature whose internals are all present and callable that way is on; any other
is off with a warning, and the launcher then behaves as torchrun does for it. Checked against torch 1.13
(Debian's python3-torch) and the pinned PyPI release (infra/dev/torch-requirements.txt) by the hook's tests.
"""

import importlib
import inspect
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

RUN = "torch.distributed.run"
REGISTRY = "torch.distributed.elastic.rendezvous.registry"
DYNAMIC = "torch.distributed.elastic.rendezvous.dynamic_rendezvous"
MP_API = "torch.distributed.elastic.multiprocessing.api"


class Internal(NamedTuple):
    """``module.attribute`` (a dotted path inside the module), bound to the call the launcher makes on it."""

    module: str
    attribute: str
    args: Tuple[Any, ...] = ()
    kwargs: Dict[str, Any] = {}


# The call shapes below are the launcher's own calls (or torch's calls into the launcher's replacement); a
# method's first argument is self.
FEATURES: Dict[str, List[Internal]] = {
    # The agent's rendezvous handler, recorded for the leave and the polling, and timed (public in both).
    "rendezvous handler": [Internal(REGISTRY, "get_rendezvous_handler", ("params",))],
    # On SIGTERM, after the workers stopped: run the exit operation the handler runs before each re-join.
    "graceful leave": [
        Internal(REGISTRY, "get_rendezvous_handler", ("params",)),
        Internal(MP_API, "SignalException", ("message", 15)),
        Internal(DYNAMIC, "_RendezvousExitOp"),
        Internal(DYNAMIC, "_DistributedRendezvousOpExecutor.run", ("self", "op", 0.0)),
        Internal(DYNAMIC, "DynamicRendezvousHandler._stop_heartbeats", ("self",)),
    ],
    # The leaving marker, created before the agent's own SIGTERM handler runs.
    "leaving marker": [Internal(MP_API, "_terminate_process_handler", (15, None))],
    # The 1 s state poll and state cache shortened.
    "fast rendezvous polling": [
        Internal(REGISTRY, "get_rendezvous_handler", ("params",)),
        Internal(DYNAMIC, "_delay", kwargs={"seconds": 1}),
        Internal(DYNAMIC, "_BackendRendezvousStateHolder.__init__", ("self", "backend", "settings"), {"cache_duration": 1}),
    ],
    # The worker command rewritten to start through the warm stub.
    "warm worker starts": [Internal(RUN, "config_from_args", ("args",))],
}


class Check(NamedTuple):
    on: List[str]
    warnings: List[str]


def _resolve(internal: Internal, import_module: Callable[[str], Any]) -> Any:
    target = import_module(internal.module)
    for part in internal.attribute.split("."):
        target = getattr(target, part)
    return target


def problem(internal: Internal, import_module: Callable[[str], Any] = importlib.import_module) -> Optional[str]:
    """Why the launcher cannot use ``internal`` (None: present, and callable as the launcher calls it)."""
    name = f"{internal.module}.{internal.attribute}"
    try:
        target = _resolve(internal, import_module)
    except (ImportError, AttributeError):
        return f"{name} is missing"
    if not callable(target):
        return f"{name} is not callable"
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # a builtin without a signature: nothing more to check
        return None
    try:
        signature.bind(*internal.args, **internal.kwargs)
    except TypeError as error:
        return f"{name}{signature} cannot be called as the launcher does ({error})"
    return None


def check(import_module: Callable[[str], Any] = importlib.import_module, version: str = "") -> Check:
    """Which launcher features the installed torch supports; one warning per feature that is off."""
    on: List[str] = []
    warnings: List[str] = []
    for feature, internals in FEATURES.items():
        problems = [p for p in (problem(i, import_module) for i in internals) if p is not None]
        if problems:
            warnings.append(
                f"trainscaler: {feature} off (torchrun's own behaviour): torch {version or '?'}: {'; '.join(problems)}"
            )
        else:
            on.append(feature)
    return Check(on, warnings)
