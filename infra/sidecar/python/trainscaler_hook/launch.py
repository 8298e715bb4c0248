"""``torchrun`` with cheaper rescales: ``python -m trainscaler_hook.launch`` takes torchrun's arguments.

What it adds to torch's own launcher (torch.distributed.run; read against torch 1.13's and torch 2.15's
torch/distributed/elastic, see docs/real-training.md). Each addition replaces or calls a few torch internals
(listed in ``torch_internals.FEATURES``), checked at start: one that is missing or changed turns that addition
off with a warning on stderr, and the launcher behaves there as torchrun does.

- **Graceful leave.** An agent stopped by SIGTERM (its pod deleted on a scale-down) leaves torchelastic's
  rendezvous instead of vanishing from it: torch's launcher deliberately does not call the handler's
  ``shutdown()`` there (that *closes* the rendezvous for every node), so the leaver stays a participant until
  its keep-alive heartbeat expires (keep_alive_interval 5 s x keep_alive_max_attempt 3), and the
  survivors cannot re-form the world for 10-15 s (torch's defaults). After its workers stopped, this launcher runs the same
  exit operation an agent runs at the start of each re-rendezvous (remove this node from the participants),
  so the next round can start at once.
- **Leaving marker.** Before the agent forwards the SIGTERM to its workers, the launcher creates the file named
  in ``TRAINSCALER_LEAVING_FILE`` (set for the workers), so a worker can tell "my pod goes away" from "my agent
  re-forms the world" (``trainscaler_hook.leaving()``) and its peers need not wait for a SIGTERM that will
  not come.
- **Faster rendezvous polling.** A node waiting in torchelastic's rendezvous polls the shared state once a
  second (a fixed 1 s delay and a 1 s state cache), so a scale-up waits the last call *and* up to a second
  more for the joiner to notice the new round and for the last call's end to be noticed. The launcher polls
  every ``TRAINSCALER_RDZV_POLL_SECONDS`` (default 0.1; a c10d store answers a get in well under a
  millisecond) instead.
- **Scale-ups that work on torch 2**: ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` unless set (see
  ``NO_SHARED_STORE_ENV``; plain torchrun 2.15 needs it too).
- **Warm worker starts** (``trainscaler_hook.warm``): a server started before the agent joins the rendezvous
  imports torch once (a joining pod warms up before it stops anybody), and each worker the agent starts is a
  fork of it. ``TRAINSCALER_WARM=0`` turns it off.

Everything else (arguments, PET_* environment, exit codes) is torchrun's.
"""

import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, List, Optional, Tuple

from . import torch_internals, warm
from .leaving import LEAVING_ENV

WARM_ENV = "TRAINSCALER_WARM"
POLL_ENV = "TRAINSCALER_RDZV_POLL_SECONDS"
# torch >= 2.4 shares the rendezvous' TCP store with the workers, and its rank 0 publishes the store's address
# (MASTER_ADDR) in its first round only: a node that joins a later round (every scale-up) waits for it until
# the store's 60 s timeout and the rescale fails (measured on torch 2.15.0 with plain torchrun). torch's opt-out
# (read by the rendezvous handler, ignored by torch 1.13) publishes it every round; set unless the job sets it.
NO_SHARED_STORE_ENV = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
WARM_READY_SECONDS = float(os.environ.get("TRAINSCALER_WARM_READY_SECONDS", "120"))
LEAVE_SECONDS = 10.0


def graceful_leave(handler: Any, exit_op: Any, seconds: float = LEAVE_SECONDS) -> bool:
    """Remove this node from the rendezvous participants now (what its expired heartbeat would do later).

    ``handler`` is torch's DynamicRendezvousHandler, ``exit_op`` its _RendezvousExitOp: private in torch 1.13,
    so anything missing means "leave the old way" (False), never a crash of a pod that is stopping anyway.
    """
    executor = getattr(handler, "_op_executor", None)
    if executor is None:
        return False
    stop_heartbeats = getattr(handler, "_stop_heartbeats", None)
    if stop_heartbeats is not None:
        stop_heartbeats()
    try:
        executor.run(exit_op, time.monotonic() + seconds)
    except Exception as error:  # the store may be gone already (its host left first): nothing to clean
        print(f"trainscaler: graceful leave failed: {error}", file=sys.stderr, flush=True)
        return False
    return True


def poll_delay(original: Callable[[Any], None], poll: float) -> Callable[[Any], None]:
    """torch's rendezvous ``_delay`` with its 1 s state poll shortened to ``poll`` (other delays unchanged)."""

    def delay(seconds):
        original(poll if seconds == 1 else seconds)

    return delay


def poll_faster(handler: Any, poll: float) -> bool:
    """Let the handler's state holder fetch the shared state every ``poll`` seconds (torch's cache: 1 s)."""
    holder = getattr(handler, "_state_holder", None)
    if holder is None or not hasattr(holder, "_cache_duration"):
        return False
    holder._cache_duration = poll
    return True


def rank_and_world(result: Any) -> Tuple[Any, Any]:
    """The rank and node count of a next_rendezvous() result: a (store, rank, world) tuple in torch 1.13, a
    RendezvousInfo (rank, world_size) in torch 2."""
    if isinstance(result, tuple):
        return result[1], result[2]
    return getattr(result, "rank", "?"), getattr(result, "world_size", "?")


def timed_rendezvous(handler: Any) -> None:
    """Log how long each rendezvous of this agent took (to stderr, beside torchrun's own log)."""
    next_rendezvous = handler.next_rendezvous

    def timed():
        started = time.monotonic()
        result = next_rendezvous()
        rank, world = rank_and_world(result)
        print(
            f"trainscaler: rendezvous done in {time.monotonic() - started:.2f} s: rank {rank} of {world} nodes",
            file=sys.stderr,
            flush=True,
        )
        return result

    handler.next_rendezvous = timed


def mark_leaving(path: str) -> None:
    with open(path, "w", encoding="utf-8") as marker:
        marker.write(f"{time.time()}\n")


def warm_worker_args(cmd: Any, cmd_args: List[str]) -> Optional[List[str]]:
    """torchrun's worker command (python -u SCRIPT ARGS) rewritten to start SCRIPT through the warm stub.

    None when the command is not a plain script run by this python (``--no_python``, ``-m``): left alone.
    """
    if cmd != sys.executable or len(cmd_args) < 2 or cmd_args[0] != "-u" or cmd_args[1] == "-m":
        return None
    return ["-u", "-m", "trainscaler_hook.warm", *cmd_args[1:]]


def _start_warm_server(socket_path: str) -> Optional[subprocess.Popen]:
    server = subprocess.Popen(
        [sys.executable, "-m", "trainscaler_hook.warm", "serve", socket_path],
        stdout=subprocess.PIPE,
        text=True,
    )
    started = time.monotonic()
    # The joining pod warms up before it enters the rendezvous: the old world keeps training meanwhile.
    ready, _, _ = select.select([server.stdout], [], [], WARM_READY_SECONDS) if server.stdout else ([], [], [])
    line = server.stdout.readline() if ready and server.stdout else ""
    if line.strip() != "ready":
        print(f"trainscaler: warm server did not start (exit {server.poll()}); cold worker starts", file=sys.stderr)
        server.kill()
        return None
    print(f"trainscaler: warm server ready in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return server


def _patch_torch(features: List[str], state: dict, leaving_file: str, poll: float) -> None:
    """Install the launcher's replacements for the ``features`` the installed torch supports (torch_internals)."""
    import torch.distributed.elastic.multiprocessing.api as mp_api
    import torch.distributed.elastic.rendezvous.dynamic_rendezvous as dynamic
    import torch.distributed.elastic.rendezvous.registry as registry
    import torch.distributed.run as run

    if "rendezvous handler" in features:
        get_handler: Callable = registry.get_rendezvous_handler
        fast_poll = poll < 1 and "fast rendezvous polling" in features

        def recording_get_handler(params):
            handler = get_handler(params)
            state["handler"] = handler
            if fast_poll and poll_faster(handler, poll):
                dynamic._delay = poll_delay(dynamic._delay, poll)
            timed_rendezvous(handler)
            return handler

        # Looked up through the module when the launcher builds the agent's WorkerSpec (launcher/api.py).
        registry.get_rendezvous_handler = recording_get_handler

    if "leaving marker" in features:
        terminate: Callable = mp_api._terminate_process_handler

        def marking_terminate(signum, frame):
            mark_leaving(leaving_file)
            terminate(signum, frame)

        # Looked up by name when the agent installs its handlers (PContext.start), so this one is installed.
        mp_api._terminate_process_handler = marking_terminate

    if "warm worker starts" in features:
        config_from_args = run.config_from_args

        def warm_config_from_args(args):
            result = config_from_args(args)
            if not (isinstance(result, tuple) and len(result) == 3):
                return result  # not torch's (config, cmd, cmd_args) any more: workers start as torchrun starts them
            config, cmd, cmd_args = result
            rewritten = warm_worker_args(cmd, cmd_args)
            return config, cmd, rewritten if rewritten is not None else cmd_args

        run.config_from_args = warm_config_from_args


def supported_features() -> List[str]:
    """The launcher features this torch supports; a warning on stderr for each one that is off."""
    import torch

    checked = torch_internals.check(version=torch.__version__)
    for warning in checked.warnings:
        print(warning, file=sys.stderr, flush=True)
    return checked.on


def main(argv: List[str]) -> int:
    import torch.distributed.run as run

    features = supported_features()
    os.environ.setdefault(NO_SHARED_STORE_ENV, "1")
    work = tempfile.mkdtemp(prefix="trainscaler-launch-")
    leaving_file = os.path.join(work, "leaving")
    if "leaving marker" in features:
        os.environ[LEAVING_ENV] = leaving_file
    warm_on = os.environ.get(WARM_ENV, "1") != "0" and "warm worker starts" in features
    server = None
    if warm_on:
        socket_path = os.path.join(work, "warm.sock")
        os.environ[warm.SOCKET_ENV] = socket_path
        server = _start_warm_server(socket_path)
        if server is None:
            del os.environ[warm.SOCKET_ENV]
            features = [f for f in features if f != "warm worker starts"]
    state: dict = {}
    poll = float(os.environ.get(POLL_ENV, "0.1"))
    if not 0 < poll <= 1:
        raise SystemExit(f"{POLL_ENV} must be in (0, 1] seconds, got {poll}")
    _patch_torch(features, state, leaving_file, poll)
    stopped: Tuple[type, ...] = ()
    if "graceful leave" in features:
        from torch.distributed.elastic.multiprocessing.api import SignalException

        stopped = (SignalException,)
    try:
        run.main(argv)
        return 0
    except stopped:
        # The workers are stopped (the agent waited for them); only now may this node leave the rendezvous.
        if "handler" in state:
            from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _RendezvousExitOp

            graceful_leave(state["handler"], _RendezvousExitOp())
        raise
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(5)
            except subprocess.TimeoutExpired:
                server.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
