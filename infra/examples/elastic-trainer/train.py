"""A small elastic DDP trainer (synthetic data, CPU, gloo) that survives trainscaler's rescales.

Run under torchrun with elastic settings, e.g.

    python3 -m trainscaler_hook.launch --nnodes=1:4 --nproc_per_node=1 --rdzv_backend=c10d \
        --rdzv_endpoint=HOST:29400 --rdzv_id=JOB --max_restarts=20 --monitor_interval=1 \
        --rdzv_conf=last_call_timeout=2 --redirects=2 --tee=1 train.py

(``trainscaler_hook.launch`` takes torchrun's arguments and makes rescales cheaper; plain ``torchrun`` works
too. torch 1.13 takes underscored flags only; on Python 3.11 it needs --redirects/--tee.) What makes it elastic:
- the data order comes from ``trainscaler_hook.elastic.ElasticSampler``: every sample of an epoch is processed
  exactly once across worlds of any size, resumed from the committed count kept in the checkpoint;
- a stop (its own SIGTERM: the agent re-forms the world or the pod is deleted; or the sidecar's drain) is agreed
  by all ranks at a step boundary through one tiny all-reduce, then rank 0 saves, so no committed step is lost;
  a rank whose pod goes away (the launcher's leaving marker, or the sidecar's drain) says LEAVE, and the others
  then exit at once for their agents to re-form the world (no SIGTERM will come to them);
  a peer that vanished without that agreement (a killed pod) costs at most the steps since the last periodic
  checkpoint;
- progress goes to the sidecar through ``trainscaler_hook.report``.

Each rank appends one JSON line per committed step to ``$TRAIN_LOG_DIR/rank-<node>.jsonl`` (time, epoch, step,
world size, the sample ids it processed): the tests and ``npm run bench:rescale`` read them.
"""

import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

# When the agent started this worker: the rescale benchmark splits the pause into process start, imports,
# process group, checkpoint load (phases-<node>.log). Under trainscaler_hook.launch the worker is a warm fork and
# the stub that the agent started records its own start.
STARTED = float(os.environ.get("TRAINSCALER_PROCESS_STARTED") or time.time())

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from trainscaler_hook import checkpoint_done, leaving, report, should_checkpoint
from trainscaler_hook.elastic import ElasticSampler

DATASET_SIZE = int(os.environ.get("TRAIN_DATASET_SIZE", "4096"))
LOCAL_BATCH = int(os.environ.get("TRAIN_LOCAL_BATCH", "16"))
EPOCHS = int(os.environ.get("TRAIN_EPOCHS", "1"))
CHECKPOINT_EVERY = int(os.environ.get("TRAIN_CHECKPOINT_EVERY", "20"))
FEATURES, CLASSES = 64, 10
HIDDEN = int(os.environ.get("TRAIN_HIDDEN", "1024"))
# A step takes at least this long (a stand-in for a bigger model's compute): keeps the pace of a test run the
# same on an idle and on a loaded machine. 0 = as fast as the small model goes.
MIN_STEP_SECONDS = float(os.environ.get("TRAIN_MIN_STEP_SECONDS", "0"))
# Seconds a worker whose peer asked to stop waits for its own agent's SIGTERM before exiting as failed:
# exiting 0 would tell torchelastic the job is done; exiting non-zero at once would spend one max_restarts on
# what is only the agent re-forming the world.
PEER_STOP_WAIT = float(os.environ.get("TRAIN_PEER_STOP_WAIT", "3"))

stop_requested = False


def on_sigterm(_signum, _frame):
    # A flag, not an exception: raising here would abandon the step in the middle of its all-reduce.
    global stop_requested
    stop_requested = True


def synthetic_sample(index):
    """Sample ``index`` of a fixed synthetic classification set (the same in every process)."""
    gen = torch.Generator().manual_seed(index)
    x = torch.randn(FEATURES, generator=gen)
    return x, int(x[:CLASSES].argmax())


def batch_tensors(ids):
    if not ids:
        return torch.zeros(0, FEATURES), torch.zeros(0, dtype=torch.long)
    xs, ys = zip(*(synthetic_sample(i) for i in ids))
    return torch.stack(xs), torch.tensor(ys)


def load_checkpoint(path, model, optimizer):
    if not path.exists():
        return {"epoch": 0, "consumed": 0, "step": 0}
    state = torch.load(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["progress"]


def save_checkpoint(path, model, optimizer, progress):
    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "progress": progress}, tmp)
    os.replace(tmp, path)  # atomic: a reader never sees half a checkpoint


# What a rank brings to the stop agreement (the world takes the maximum).
GO_ON, STOP, LEAVE = 0.0, 1.0, 2.0


def agreed_stop(own):
    """The world's decision at this step boundary: GO_ON, STOP (an agent re-forms the world: every rank gets
    SIGTERM) or LEAVE (a pod goes away: only its ranks get SIGTERM, the others must exit by themselves)."""
    flag = torch.tensor([own])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return flag.item()


def main():
    signal.signal(signal.SIGTERM, on_sigterm)
    imported = time.time()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    # One id per world formation, the same on every rank: a step re-done after a restart is told apart by it.
    world_id = torch.tensor([time.time()], dtype=torch.float64)
    dist.broadcast(world_id, src=0)
    ckpt_dir = Path(os.environ.get("TRAIN_CHECKPOINT_DIR", "checkpoints"))
    log_dir = Path(os.environ.get("TRAIN_LOG_DIR", "train-logs"))
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    ckpt = ckpt_dir / "latest.pt"
    node = os.environ.get("TRAIN_NODE_NAME") or socket.gethostname()
    log = open(log_dir / f"rank-{node}.jsonl", "a", buffering=1)
    phases = open(log_dir / f"phases-{node}.log", "a", buffering=1)
    grouped = time.time()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    progress = load_checkpoint(ckpt, model, optimizer)
    ddp = DistributedDataParallel(model)
    sampler = ElasticSampler(DATASET_SIZE, world, rank, LOCAL_BATCH, epoch=progress["epoch"], consumed=progress["consumed"])
    step = progress["step"]
    phases.write(json.dumps({"world_id": world_id.item(), "rank": rank, "started": STARTED, "imported": imported, "grouped": grouped, "ready": time.time()}) + "\n")
    print(f"rank {rank}/{world} on {node} resumes at epoch {sampler.epoch} sample {sampler.consumed} step {step}", flush=True)

    def snapshot():
        return {"epoch": sampler.epoch, "consumed": sampler.consumed, "step": step}

    own_samples = 0
    while sampler.epoch < EPOCHS:
        for ids in sampler:
            started = time.monotonic()
            x, y = batch_tensors(ids)
            loss = torch.nn.functional.cross_entropy(ddp(x), y, reduction="sum") / max(1, sampler.global_batch_size)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            time.sleep(max(0.0, MIN_STEP_SECONDS - (time.monotonic() - started)))
            sampler.advance()
            step += 1
            log.write(json.dumps({"t": time.time(), "epoch": sampler.epoch, "step": step, "world": world, "world_id": world_id.item(), "rank": rank, "ids": ids}) + "\n")
            # The samples THIS worker processed (the sidecar's trainscaler_samples_total is per worker). Not
            # step x the world's batch: that jumps at every rescale, and the per-worker throughput alert then
            # fires on the resize itself. Counted from this process's start (a re-formed world restarts it),
            # which the sidecar reads as a restart of the count, adding nothing.
            own_samples += len(ids)
            report(step, samples=own_samples)
            drained = should_checkpoint()  # the sidecar's drain: this pod is being stopped
            own = LEAVE if (stop_requested or drained) and (drained or leaving()) else STOP if stop_requested else GO_ON
            decision = agreed_stop(own)
            if decision != GO_ON:
                stopping = time.time()
                if rank == 0:
                    save_checkpoint(ckpt, model, optimizer, snapshot())
                    checkpoint_done()
                dist.barrier()
                if own == GO_ON and decision == STOP:
                    deadline = time.time() + PEER_STOP_WAIT
                    while not stop_requested and time.time() < deadline:
                        time.sleep(0.05)
                phases.write(json.dumps({"world_id": world_id.item(), "rank": rank, "stopping": stopping, "exiting": time.time()}) + "\n")
                sys.exit(0 if stop_requested else 1)
            if rank == 0 and step % CHECKPOINT_EVERY == 0:
                save_checkpoint(ckpt, model, optimizer, snapshot())
        sampler.next_epoch()
    if rank == 0:
        save_checkpoint(ckpt, model, optimizer, snapshot())
        (ckpt_dir / "DONE").write_text(str(step))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
