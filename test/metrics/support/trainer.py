"""A small stand-in for a data-parallel training worker, for the metrics integration test.

It "trains" by sleeping one step time per step and reports progress the two ways a real trainer would:
through the trainscaler hook (--mode hook) or by printing log lines to a file its sidecar tails
(--mode log). --slow-after/--slow-factor turn it into a straggler part-way through. It stops on its own
after --max-seconds, or when the sidecar asks it to checkpoint.
"""

import argparse
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["hook", "log"], required=True)
    parser.add_argument("--step-seconds", type=float, default=0.1)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--slow-after", type=float, default=None, help="seconds after start")
    parser.add_argument("--slow-factor", type=float, default=1.0)
    parser.add_argument("--log-file", default=None)
    parser.add_argument("--max-seconds", type=float, default=120.0)
    args = parser.parse_args()

    log = open(args.log_file, "a", buffering=1) if args.mode == "log" else None
    if args.mode == "hook":
        from trainscaler_hook import checkpoint_done, report, should_checkpoint

    started = time.monotonic()
    step = 0
    while time.monotonic() - started < args.max_seconds:
        elapsed = time.monotonic() - started
        slow = args.slow_after is not None and elapsed >= args.slow_after
        time.sleep(args.step_seconds * (args.slow_factor if slow else 1.0))
        step += 1
        if log is not None:
            log.write(f"epoch 0 step {step} samples={step * args.batch} loss {1.0 / step:.4f}\n")
        else:
            report(step, samples=step * args.batch)
            if should_checkpoint():
                print(f"checkpoint at step {step}", flush=True)
                checkpoint_done()
                return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
