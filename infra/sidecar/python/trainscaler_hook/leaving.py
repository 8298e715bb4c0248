"""Whether this worker's agent is leaving the job for good (its pod is being deleted), not re-forming it.

``trainscaler_hook.launch`` creates the file named in ``TRAINSCALER_LEAVING_FILE`` when its agent gets SIGTERM,
before the agent forwards the signal to its workers. A worker stopping at a step boundary tells its peers so:
they will get no SIGTERM of their own (their agents only see a failed peer), so they can exit at once and let
their agents re-form the world, instead of waiting for a signal first. Under plain torchrun the variable is
unset and ``leaving()`` is always False.
"""

import os

LEAVING_ENV = "TRAINSCALER_LEAVING_FILE"


def leaving() -> bool:
    path = os.environ.get(LEAVING_ENV)
    return bool(path) and os.path.exists(path)
