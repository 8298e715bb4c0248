"""An ordinary DDP training script for torchrun, with no trainscaler code (synthetic data, CPU, gloo).

Written as torchelastic's docs ask of an elastic script: load the checkpoint if there is one, train, save a
checkpoint from rank 0 at intervals; torchrun restarts every worker when the world changes, and the script
resumes from its last checkpoint. The steps after that checkpoint are trained again: at most
--checkpoint-every - 1 of them, or --checkpoint-every when rank 0 was stopped while saving the next checkpoint
(the previous one stays whole). Run e.g.

    torchrun --nnodes=1:4 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint=HOST:29400 --rdzv_id=JOB \
        --max_restarts=10 train.py --checkpoint-dir /shared/ckpt --checkpoint-every 50

It prints one line per step (``step N epoch E batch B/BATCHES rank R/WORLD loss L``), one when it resumes and
one per checkpoint it saved: ``npm run bench:rescale`` reads only that output.
"""

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler

FEATURES, CLASSES, HIDDEN = 64, 10, 1024


class SyntheticClassification(Dataset):
    """A fixed synthetic classification set: sample i is the same in every process."""

    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        x = torch.randn(FEATURES, generator=torch.Generator().manual_seed(index))
        return x, int(x[:CLASSES].argmax())


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint-dir", default=os.environ.get("CHECKPOINT_DIR", "checkpoints"))
    parser.add_argument("--checkpoint-every", type=int, default=int(os.environ.get("CHECKPOINT_EVERY", "100")))
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--dataset-size", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=16, help="per rank")
    parser.add_argument("--max-steps", type=int, default=0, help="stop after this step (0: no limit)")
    return parser.parse_args()


def load_checkpoint(path, model, optimizer):
    if not path.exists():
        return {"step": 0, "epoch": 0, "consumed": 0}
    state = torch.load(path, map_location="cpu")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["progress"]


def save_checkpoint(path, model, optimizer, progress):
    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "progress": progress}, tmp)
    os.replace(tmp, path)  # a worker killed mid-save leaves the previous checkpoint whole


def main():
    args = parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    checkpoint = Path(args.checkpoint_dir) / "checkpoint.pt"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    progress = load_checkpoint(checkpoint, model, optimizer)
    ddp = DistributedDataParallel(model)
    step, epoch, consumed = progress["step"], progress["epoch"], progress["consumed"]
    print(f"resumed from step {step} epoch {epoch} sample {consumed} rank {rank}/{world}")

    dataset = SyntheticClassification(args.dataset_size)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
    global_batch = args.batch_size * world
    while epoch < args.epochs and not (args.max_steps and step >= args.max_steps):
        sampler.set_epoch(epoch)
        # Mid-epoch resume: skip the batches the epoch already trained on. The world may have another size
        # than when they were counted: round down to whole batches of this world (a few samples seen twice).
        done = consumed // global_batch
        consumed = done * global_batch
        batches = len(sampler) // args.batch_size
        order = list(sampler)[done * args.batch_size : batches * args.batch_size]
        loader = DataLoader(dataset, batch_size=args.batch_size, sampler=order)
        for batch, (x, y) in enumerate(loader, start=done + 1):
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            consumed += global_batch
            print(f"step {step} epoch {epoch} batch {batch}/{batches} rank {rank}/{world} loss {loss.item():.4f}")
            if rank == 0 and step % args.checkpoint_every == 0:
                save_checkpoint(checkpoint, model, optimizer, {"step": step, "epoch": epoch, "consumed": consumed})
                print(f"checkpoint step {step} rank {rank}/{world}")
            if args.max_steps and step >= args.max_steps:
                break  # as if stopped here: the steps since the last checkpoint are not saved
        else:
            epoch, consumed = epoch + 1, 0
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
