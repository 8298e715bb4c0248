"""Report training progress to the trainscaler sidecar beside the trainer, and checkpoint when it asks.

    from trainscaler_hook import report, should_checkpoint, checkpoint_done

    for step, batch in enumerate(loader, start=1):
        train_step(batch)
        report(step, samples=step * local_batch_size)
        if should_checkpoint():          # the pod is being stopped (scale-down, eviction)
            save_checkpoint()
            checkpoint_done()
            break

``report`` never blocks and never raises on a network problem: it stores the latest cumulative counts and
a background thread posts them to the sidecar (``TRAINSCALER_HOOK_URL``, default http://127.0.0.1:9471)
at most once per interval. Standard library only; no torch or tensorflow needed.
"""

from .leaving import leaving
from .reporter import DEFAULT_URL, Reporter, checkpoint_done, default_reporter, flush, report, should_checkpoint

__all__ = [
    "DEFAULT_URL",
    "Reporter",
    "checkpoint_done",
    "default_reporter",
    "flush",
    "leaving",
    "report",
    "should_checkpoint",
]
