import random

import pytest

from trainscaler_hook.elastic import ElasticSampler, epoch_permutation


def run_world(dataset_size, world_size, local_batch, consumed, steps, epoch=0, seed=7):
    """Every rank of one world takes `steps` steps from `consumed`; returns the samples and the new consumed."""
    samplers = [
        ElasticSampler(dataset_size, world_size, rank, local_batch, seed=seed, epoch=epoch, consumed=consumed)
        for rank in range(world_size)
    ]
    iters = [iter(s) for s in samplers]
    seen = []
    for _ in range(steps):
        if samplers[0].epoch_done():
            break
        for it in iters:
            seen.extend(next(it))
        for s in samplers:
            s.advance()
    return seen, samplers[0].consumed


def test_one_world_covers_the_epoch_exactly_once():
    seen, consumed = run_world(103, 4, 8, 0, steps=100)
    assert sorted(seen) == list(range(103))
    assert consumed == 103


@pytest.mark.parametrize("trial", range(30))
def test_any_sequence_of_world_sizes_covers_the_epoch_exactly_once(trial):
    rng = random.Random(trial)
    size = rng.randint(1, 500)
    consumed, seen = 0, []
    while consumed < size:
        part, consumed = run_world(size, rng.randint(1, 9), rng.randint(1, 16), consumed, steps=rng.randint(1, 5))
        seen.extend(part)
    assert sorted(seen) == list(range(size))


def test_a_resumed_world_continues_where_the_committed_prefix_ends():
    first, consumed = run_world(64, 2, 4, 0, steps=3)
    assert consumed == 24
    assert first == list(epoch_permutation(64, 7, 0)[:24])
    second, _ = run_world(64, 3, 4, consumed, steps=1)
    assert second == list(epoch_permutation(64, 7, 0)[24:36])


def test_an_uncommitted_step_is_replayed_not_skipped():
    sampler = ElasticSampler(40, 2, 0, 5, seed=1)
    first = next(iter(sampler))  # taken, but the world died before advance()
    resumed = ElasticSampler(40, 2, 0, 5, seed=1, consumed=sampler.consumed)
    assert next(iter(resumed)) == first


def test_the_short_last_step_is_split_across_ranks():
    batches = [ElasticSampler(10, 4, rank, 4, consumed=8).window(8) for rank in range(4)]
    assert [len(b) for b in batches] == [1, 1, 0, 0]


def test_epochs_have_different_orders_and_next_epoch_restarts_the_count():
    assert epoch_permutation(50, 3, 0) != epoch_permutation(50, 3, 1)
    sampler = ElasticSampler(10, 1, 0, 10, consumed=10)
    assert sampler.epoch_done()
    sampler.next_epoch()
    assert (sampler.epoch, sampler.consumed, sampler.epoch_done()) == (1, 0, False)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(dataset_size=10, world_size=2, rank=2, local_batch_size=1),
        dict(dataset_size=10, world_size=0, rank=0, local_batch_size=1),
        dict(dataset_size=10, world_size=1, rank=0, local_batch_size=0),
        dict(dataset_size=10, world_size=1, rank=0, local_batch_size=1, consumed=11),
    ],
)
def test_bad_arguments_are_refused(kwargs):
    with pytest.raises(ValueError):
        ElasticSampler(**kwargs)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 16, 17, 50, 64, 1000, 4097])
def test_the_epoch_order_is_a_permutation_of_the_dataset(size):
    order = epoch_permutation(size, 11, 2)
    assert sorted(order) == list(range(size))
    assert len(order) == size


def test_the_epoch_order_is_the_same_in_every_process_and_differs_by_seed():
    assert list(epoch_permutation(1000, 1, 0)) == list(epoch_permutation(1000, 1, 0))
    assert list(epoch_permutation(1000, 1, 0)) != list(epoch_permutation(1000, 2, 0))
    assert list(epoch_permutation(1000, 1, 0)) != list(range(1000)), "shuffled, not the identity"


def test_a_window_of_a_huge_dataset_is_computed_without_the_rest():
    # ten million samples: materialising the order would take minutes; a step's window must not
    order = epoch_permutation(10_000_000, 0, 0)
    window = order[5_000_000:5_000_016]
    assert len(set(window)) == 16 and all(0 <= i < 10_000_000 for i in window)
    assert order[-1] == order[9_999_999]
    sampler = ElasticSampler(10_000_000, 4, 3, 16, consumed=9_999_936)
    assert sum(len(ids) for ids in sampler) == 16
