"""Elastic data pipeline: every sample of an epoch is processed exactly once, whatever the world size does.

A world that changes size mid-epoch (a torchelastic restart after trainscaler adds or removes workers) must
neither skip nor repeat samples. The epoch's order is a permutation fixed by (seed, epoch), and progress is one
number, the count of samples the whole world has committed in this epoch (``consumed``). Step k of a world of
size W with local batch m takes the next W * m samples of the permutation, rank r the r-th slice of m: so the
samples committed after any number of steps are exactly a prefix of the permutation, and a new world of any
size resumes from ``consumed`` (kept in the checkpoint) with nothing skipped and nothing repeated.

Standard library only, so it can be tested without torch; ``ElasticSampler`` also works as a torch sampler
(``DataLoader(dataset, batch_sampler=sampler)``) since it yields lists of indices.
"""

import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator, List, Tuple


@lru_cache(maxsize=2)
def epoch_permutation(dataset_size: int, seed: int, epoch: int) -> Tuple[int, ...]:
    """The epoch's sample order, the same in every process and every world (cached: one shuffle per epoch)."""
    if dataset_size <= 0:
        raise ValueError(f"dataset_size must be positive, got {dataset_size}")
    order = list(range(dataset_size))
    random.Random(f"{seed}:{epoch}").shuffle(order)
    return tuple(order)


@dataclass
class ElasticSampler:
    """Yields rank ``rank``'s local batch for each step of the rest of the epoch.

    The last step of an epoch may be short: its W * m window is split as evenly as the samples left allow, so
    some ranks may get one sample fewer, or none (they then yield an empty batch and must still join the
    step's collectives).
    """

    dataset_size: int
    world_size: int
    rank: int
    local_batch_size: int
    seed: int = 0
    epoch: int = 0
    consumed: int = 0

    def __post_init__(self) -> None:
        if self.world_size <= 0 or not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is not in a world of size {self.world_size}")
        if self.local_batch_size <= 0:
            raise ValueError(f"local_batch_size must be positive, got {self.local_batch_size}")
        if not 0 <= self.consumed <= self.dataset_size:
            raise ValueError(f"consumed must be within 0..{self.dataset_size}, got {self.consumed}")

    @property
    def global_batch_size(self) -> int:
        return self.world_size * self.local_batch_size

    def steps_left(self) -> int:
        left = self.dataset_size - self.consumed
        return -(-left // self.global_batch_size)

    def window(self, start: int) -> List[int]:
        """Rank's slice of the step whose window starts at ``start`` samples into the epoch."""
        order = epoch_permutation(self.dataset_size, self.seed, self.epoch)
        end = min(start + self.global_batch_size, self.dataset_size)
        size = end - start
        base, extra = divmod(size, self.world_size)
        lo = start + self.rank * base + min(self.rank, extra)
        hi = lo + base + (1 if self.rank < extra else 0)
        return list(order[lo:hi])

    def __iter__(self) -> Iterator[List[int]]:
        start = self.consumed
        while start < self.dataset_size:
            yield self.window(start)
            start = min(start + self.global_batch_size, self.dataset_size)

    def __len__(self) -> int:
        return self.steps_left()

    def advance(self) -> None:
        """Record one committed step of the whole world (call it after the optimizer step)."""
        self.consumed = min(self.consumed + self.global_batch_size, self.dataset_size)

    def epoch_done(self) -> bool:
        return self.consumed >= self.dataset_size

    def next_epoch(self) -> None:
        self.epoch += 1
        self.consumed = 0
