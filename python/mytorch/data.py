"""Datasets and a DataLoader: batching, seeded shuffling, drop_last, and a per-rank split."""
from __future__ import annotations

import math

import numpy as np
import torch

from .tensor import Tensor


class Dataset:
    """Anything with __len__ and __getitem__(i) -> sample (a tuple of Tensors or numbers)."""

    def __len__(self):
        raise NotImplementedError

    def __getitem__(self, i):
        raise NotImplementedError


class TensorDataset(Dataset):
    """Row i of every tensor; all tensors share their first dimension."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor")
        tensors = tuple(t if isinstance(t, Tensor) else Tensor(t) for t in tensors)
        n = tensors[0].shape[0]
        for t in tensors[1:]:
            if t.shape[0] != n:
                raise ValueError(f"TensorDataset: size mismatch between tensors, first dims "
                                 f"{[t.shape[0] for t in tensors]}")
        self.tensors = tensors

    def __len__(self):
        return self.tensors[0].shape[0]

    def __getitem__(self, i):
        return tuple(t[i] for t in self.tensors)


class DistributedSampler:
    """The indices one rank sees: a seeded shuffle (the same on every rank, per epoch),
    padded to a multiple of num_replicas, then every num_replicas-th index from rank.
    num_replicas and rank default to the world size and rank of torch.distributed."""

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        if num_replicas is None or rank is None:
            import torch.distributed as dist

            if not (dist.is_available() and dist.is_initialized()):
                raise ValueError("DistributedSampler: num_replicas and rank were not given and "
                                 "torch.distributed is not initialized")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be at least 1, got "
                             f"{num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: rank {rank} is not in [0, {num_replicas})")
        self.n, self.replicas, self.rank = len(dataset), num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        if drop_last:
            self.num_samples = self.n // num_replicas
        else:
            self.num_samples = math.ceil(self.n / num_replicas)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        if self.shuffle:
            idx = np.random.default_rng(self.seed + self.epoch).permutation(self.n)
        else:
            idx = np.arange(self.n)
        total = self.num_samples * self.replicas
        if total > self.n:
            idx = np.concatenate([idx, idx[: total - self.n]])
        idx = idx[:total]
        return iter(idx[self.rank::self.replicas].tolist())

    def __len__(self):
        return self.num_samples


class DataLoader:
    """Batches of a dataset. With shuffle, epoch e uses the permutation seeded by (seed, e),
    so two loaders with the same seed yield the same batches."""

    def __init__(self, dataset, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False,
                 seed: int = 0, sampler=None):
        if batch_size < 1:
            raise ValueError(f"DataLoader: batch_size should be a positive integer, got {batch_size}")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        self.dataset, self.batch_size, self.shuffle = dataset, batch_size, shuffle
        self.drop_last, self.sampler, self.seed, self.epoch = drop_last, sampler, seed, 0

    def _indices(self) -> np.ndarray:
        if self.sampler is not None:
            return np.fromiter(iter(self.sampler), dtype=np.int64)
        n = len(self.dataset)
        if self.shuffle:
            return np.random.default_rng((self.seed, self.epoch)).permutation(n)
        return np.arange(n)

    def __len__(self):
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def __iter__(self):
        idx = self._indices()
        self.epoch += 1
        stop = len(idx) - len(idx) % self.batch_size if self.drop_last else len(idx)
        # A TensorDataset is gathered a batch at a time (in numpy) instead of row by row.
        arrays = ([t.data.numpy() for t in self.dataset.tensors]
                  if isinstance(self.dataset, TensorDataset) and
                  all(t.data.device.type == "cpu" for t in self.dataset.tensors) else None)
        for start in range(0, stop, self.batch_size):
            chunk = idx[start:start + self.batch_size]
            if arrays is not None:
                yield tuple(Tensor(torch.from_numpy(a[chunk])) for a in arrays)
            else:
                yield _collate([self.dataset[int(i)] for i in chunk])


def _collate(samples):
    first = samples[0]
    if isinstance(first, tuple | list):
        return tuple(_collate([s[j] for s in samples]) for j in range(len(first)))
    if isinstance(first, Tensor):
        return Tensor(torch.from_numpy(np.stack([s.numpy() for s in samples])))
    return Tensor(torch.from_numpy(np.asarray(samples)))
