"""What the workers of a sharded run read of one shard: its scratch file of distances, its training side, its groups.

A recipe's groups file is read once, in the main process (calibrate.recipe.groups); the workers read it as
:class:`ShardGroups`, a scratch file in the run's staging folder of the class names (UTF-8, sorted) and their group
codes, so that no task carries a million names. :class:`ShardTraining` is one shard's training side as an
estimator's partitioned fit sees it (calibrate.contract.sharded.ShardRunner.map_training): its impostor distances,
its training genuine distances (auto's choice is judged on them) and its groups. Pass 0 (calibrate.running.sharded)
saves each shard's distances to a scratch file (:func:`save_shard_data`) that the later passes load
(:func:`shard_data`, :func:`shard_training`) instead of reading the shard again. Re-exported by
calibrate.contract.sharded, the public module.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from calibrate.contract.comparisons import DistanceMatrix, GenuineDistances, ImpostorDistances
from calibrate.contract.labels import GroupLabels, TrainingGroups, factorise


def name_hashes(names) -> np.ndarray:
    """One signed 64-bit hash (BLAKE2b of its UTF-8 bytes) per name, each distinct name hashed once: how a sharded
    run recognises a class or a probe across shards without sending its name."""
    distinct, inverse = np.unique(np.asarray(names).astype(str), return_inverse=True)
    return np.array([int.from_bytes(hashlib.blake2b(c.encode("utf-8"), digest_size=8).digest(), "little", signed=True)
                     for c in distinct.tolist()], dtype=np.int64)[inverse.ravel()]


def other_group(probe: np.ndarray, claimed: np.ndarray, labelled: int) -> np.ndarray:
    """Which impostor comparisons calibration against same-group impostors leaves out: those of a labelled class with
    a probe of another group or of none. ``probe`` and ``claimed`` are group codes (GroupLabels.codes: ``labelled``,
    the number of groups, for a class without one), broadcast against each other."""
    return (probe != claimed) & (claimed < labelled)


@dataclass(frozen=True)
class ShardGroups:
    """The groups as the workers read them: ``path``, a scratch file of the classes' UTF-8 names (sorted) and their
    codes into ``names``; ``same_group``: the run calibrates against same-group impostors only."""

    path: str
    names: tuple[str, ...]
    same_group: bool = False

    @classmethod
    def write(cls, labels: GroupLabels, path: str | Path, same_group: bool = False) -> "ShardGroups":
        names = labels.names
        index = {g: k for k, g in enumerate(names)}
        encoded = np.array([c.encode("utf-8") for c in labels.classes], dtype=bytes)
        codes = np.array([index[g] for g in labels.groups], dtype=np.int64)
        order = np.argsort(encoded, kind="stable")
        path = Path(path)
        temp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        with open(temp, "wb") as fh:
            np.save(fh, encoded[order], allow_pickle=False)
            np.save(fh, codes[order], allow_pickle=False)
        os.replace(temp, path)
        return cls(str(path), names, same_group)

    @property
    def labelled(self) -> int:
        return len(self.names)

    def _table(self) -> tuple[np.ndarray, np.ndarray]:
        with open(self.path, "rb") as fh:
            return np.load(fh, allow_pickle=False), np.load(fh, allow_pickle=False)

    def lookup(self, labels) -> tuple[np.ndarray, np.ndarray]:
        """(each of ``labels``' group code, ``len(names)`` for a class the file does not list; the positions in the
        file's sorted class list of the distinct labels it lists)."""
        unique, inverse = factorise(labels)
        keys, codes = self._table()
        encoded = np.array([u.encode("utf-8") for u in unique.tolist()], dtype=bytes)
        if not keys.size or not encoded.size:
            return np.full(np.shape(inverse), self.labelled, dtype=np.int64), np.zeros(0, dtype=np.int64)
        at = np.minimum(np.searchsorted(keys, encoded), keys.size - 1)
        found = keys[at] == encoded
        table = np.where(found, codes[at], self.labelled)
        return table[inverse].astype(np.int64), np.unique(at[found])

    def codes(self, labels) -> np.ndarray:
        return self.lookup(labels)[0]


def same_group_masked(matrix: DistanceMatrix, probe: np.ndarray, claimed: np.ndarray, labelled: int
                      ) -> tuple[DistanceMatrix, int, int]:
    """``matrix`` with the impostor comparisons :func:`other_group` leaves out made invalid (``probe``: each row's
    group code, ``claimed``: each column's), and how many it left out and kept."""
    cross = matrix.impostor_mask() & other_group(probe[:, None], claimed[None, :], labelled)
    left_out = int(np.count_nonzero(cross))
    kept = int(np.count_nonzero(matrix.impostor_mask())) - left_out
    return (DistanceMatrix(matrix.values, matrix.probe_classes, matrix.gallery_classes, matrix.valid & ~cross,
                           matrix.kind, matrix.probe_ids, matrix.gallery_ids, matrix.source), left_out, kept)


@dataclass(frozen=True)
class ShardTraining:
    """One shard's training side: its classes' impostor distances, their training genuine distances (in the same
    class order; None when the reader has none) and their groups (None without groups)."""

    impostors: ImpostorDistances
    genuine: GenuineDistances | None = None
    groups: TrainingGroups | None = None
    #: the shard's index in the run (None when not known), e.g. to name a scratch file of the shard's own
    index: int | None = None
    #: the impostor distances' probe identities, when the run keeps them (ShardJob.units: a predicted interval's sample
    #: measures how false accepts cluster by probe): :class:`ProbeRows`, or (each distance's code, names) for a subset
    probes: "ProbeRows | tuple[np.ndarray, np.ndarray] | None" = None

    def stratum(self, code: int) -> "ShardTraining":
        """The classes of group ``code`` (``len(names)``: the classes without a group) alone, without groups (as
        calibrate.saved.grouped.fit_by_group fits each group)."""
        rows = np.flatnonzero(self.groups.of_class == code)
        return ShardTraining(_rows(self.impostors, rows, ImpostorDistances),
                             None if self.genuine is None else _rows(self.genuine, rows, GenuineDistances), None,
                             self.index)


    def distance_probes(self) -> "tuple[np.ndarray, np.ndarray] | None":
        """(each impostor distance's probe code, the names the codes index), or None where the run keeps none."""
        if isinstance(self.probes, ProbeRows):
            return self.probes.of_classes(np.arange(len(self.impostors)))
        return self.probes

    def subset(self, rows: np.ndarray) -> "ShardTraining":
        """The classes at positions ``rows`` (ascending) alone, with their genuine distances, groups and probes."""
        rows = np.asarray(rows, dtype=np.int64)
        index = _index(self.impostors, rows)
        groups = (None if self.groups is None else
                  TrainingGroups(self.groups.names, self.groups.of_class[rows], self.groups.of_impostor[index]))
        probes = (None if self.probes is None else self.probes.of_classes(rows) if isinstance(self.probes, ProbeRows)
                  else (self.probes[0][index], self.probes[1]))
        return ShardTraining(_rows(self.impostors, rows, ImpostorDistances),
                             None if self.genuine is None else _rows(self.genuine, rows, GenuineDistances), groups,
                             self.index, probes)


@dataclass(frozen=True)
class ProbeRows:
    """Which probe identity each training impostor distance of a shard comes from, kept small: each training row's
    identity (``codes`` into ``names``) and the impostor mask, transposed (classes x rows) and packed to a bit a cell;
    a class's distances are its column's impostor rows in order (ImpostorDistances.from_matrix's order)."""

    codes: np.ndarray
    names: np.ndarray
    packed: np.ndarray
    shape: tuple[int, int]

    @classmethod
    def of_matrix(cls, train_d) -> "ProbeRows":
        names, of_row = factorise(train_d.probe_classes)
        mask_t = train_d.impostor_mask().T
        return cls(of_row.astype(np.int32), names, np.packbits(mask_t, axis=None), mask_t.shape)

    def of_classes(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(each distance's code, names) of the classes at positions ``rows``, in their order."""
        mask_t = np.unpackbits(self.packed, count=self.shape[0] * self.shape[1]).reshape(self.shape).astype(bool)
        at = [self.codes[mask_t[j]] for j in np.asarray(rows).tolist()]
        return (np.concatenate(at) if at else np.zeros(0, dtype=np.int32)), self.names


def _index(flat, rows: np.ndarray) -> np.ndarray:
    """The positions in ``flat.values`` of the classes at ``rows``, in that order."""
    return (np.concatenate([np.arange(flat.offsets[i], flat.offsets[i + 1]) for i in rows.tolist()])
            if rows.size else np.zeros(0, dtype=np.int64))


def _rows(flat, rows: np.ndarray, kind):
    counts = flat.counts()[rows]
    classes = tuple(flat.classes[i] for i in rows.tolist())
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return kind(classes, flat.values[_index(flat, rows)], offsets)


@dataclass(frozen=True)
class ShardClasses:
    """What the run's first pass says of one shard's classes: each one's training impostor and genuine counts and,
    with groups, its group code (an index into the groups' names, their number for a class without one)."""

    counts: np.ndarray
    genuine: np.ndarray
    groups: np.ndarray | None = None


#: the order of the arrays in a shard's scratch file (:func:`save_shard_data`): the training ones first, so that a
#: pass that needs only those stops reading there (the impostors' three first of all)
_CACHED = ("values", "offsets", "classes", "genuine_values", "genuine_offsets", "class_groups", "impostor_groups",
           "test_values", "test_probes", "test_gallery", "test_valid", "test_ids", "probe_codes", "probe_names",
           "probe_mask", "probe_shape")
_TRAINING = 7


def save_shard_data(path: str | Path, impostors: ImpostorDistances, test_d, genuine: GenuineDistances | None = None,
                    groups: TrainingGroups | None = None, probes: "ProbeRows | None" = None) -> None:
    """The shard's training impostor distances, its training genuine distances and groups (when it has them) and its
    evaluation distances (transformed and checked), as the later passes need them: one file of consecutive .npy
    arrays (``_CACHED``; about 9 bytes per distance; no zip container, whose CRC costs more than the writing), written
    whole under a temporary name."""
    path = Path(path)
    temp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    none = np.zeros(0, dtype=np.int64)
    arrays = (impostors.values, np.asarray(impostors.offsets, dtype=np.int64), np.asarray(impostors.classes, dtype=str),
              np.zeros(0) if genuine is None else genuine.values,
              none if genuine is None else np.asarray(genuine.offsets, dtype=np.int64),
              none if groups is None else _small(groups.of_class),
              none if groups is None else _small(groups.of_impostor),
              test_d.values, test_d.probe_classes, test_d.gallery_classes, test_d.valid, test_d.probe_ids,
              none.astype(np.int32) if probes is None else probes.codes,
              np.zeros(0, dtype=str) if probes is None else probes.names,
              np.zeros(0, dtype=np.uint8) if probes is None else probes.packed,
              none if probes is None else np.asarray(probes.shape, dtype=np.int64))
    with open(temp, "wb") as fh:
        for array in arrays:
            np.save(fh, np.asarray(array), allow_pickle=False)
    os.replace(temp, path)


def _small(codes: np.ndarray) -> np.ndarray:
    """Group codes (at most MAX_GROUPS + 1 of them) as one byte each in the scratch file."""
    return codes.astype(np.int8) if codes.size == 0 or codes.max() < 127 else codes.astype(np.int16)


def _load_shard_data(job, evaluation: bool, training: bool = False):
    from calibrate.contract.types import DistanceMatrix

    count = len(_CACHED) if evaluation else _TRAINING if training else 3
    with open(job.cache, "rb") as fh:
        z = {name: np.load(fh, allow_pickle=False) for name in _CACHED[:count]}
    impostors = ImpostorDistances(tuple(z["classes"].tolist()), z["values"], z["offsets"])
    test_d = (DistanceMatrix(z["test_values"], z["test_probes"], z["test_gallery"], z["test_valid"], "distance",
                             z["test_ids"], source=f"{job.shard[-1]} (evaluation rows)") if evaluation else None)
    if not (training or evaluation):
        return impostors, test_d, None
    genuine = (GenuineDistances(impostors.classes, z["genuine_values"], z["genuine_offsets"])
               if z["genuine_offsets"].size else None)
    groups = (TrainingGroups(job.groups.names, z["class_groups"], z["impostor_groups"])
              if job.groups is not None and z["class_groups"].size == len(impostors) else None)
    probes = (ProbeRows(z["probe_codes"], z["probe_names"], z["probe_mask"], tuple(int(n) for n in z["probe_shape"]))
              if evaluation and z["probe_shape"].size == 2 else None)
    return impostors, test_d, ShardTraining(impostors, genuine, groups, job.index, probes)


def read_split(job):
    """(split, columns, absent, notes, left out, kept) of one shard as the run fits it: read, and with ``impostors:
    same-group`` the impostor comparisons of a labelled class with a probe of another group made invalid in both
    matrices (left out and kept: how many impostor comparisons)."""
    split, columns, absent, notes = job.dataset.read_shard(job.shard, job.offset)
    left_out = kept = 0
    if job.groups is not None and job.groups.same_group:
        masked = []
        for m in (split.train, split.test):
            new, out, inside = same_group_masked(m, job.groups.codes(m.probe_classes),
                                                 job.groups.codes(m.gallery_classes), job.groups.labelled)
            masked.append(new)
            left_out, kept = left_out + out, kept + inside
        split = replace(split, train=masked[0], test=masked[1])
    return split, columns, absent, notes, left_out, kept


def training_of(job, train_d) -> ShardTraining:
    """A shard's training side from its transformed training matrix."""
    impostors = ImpostorDistances.from_matrix(train_d)
    genuine = GenuineDistances.from_matrix(train_d, impostors.classes)
    groups = probes = None
    mask = train_d.impostor_mask()
    if job.groups is not None:
        probe = job.groups.codes(train_d.probe_classes)
        groups = TrainingGroups(job.groups.names, job.groups.codes(train_d.gallery_classes),
                                np.broadcast_to(probe[:, None], mask.shape).T[mask.T])  # as from_matrix orders them
    if getattr(job, "units", False):
        probes = ProbeRows.of_matrix(train_d)
    return ShardTraining(impostors, genuine, groups, probes=probes)


def shard_data(job, evaluation: bool = True):
    """(training impostor distances, evaluation distances) of one shard; the evaluation distances
    (transformed and checked) only when ``evaluation``, else None. From the job's cache when it has one (the
    same arrays: pass 0 computed them with a transform of the same parameters and fitted state), else read."""
    if job.cache is not None:
        return _load_shard_data(job, evaluation)[:2]
    training, test_d = shard_training(job, evaluation)
    return training.impostors, test_d


def shard_training(job, evaluation: bool = False) -> tuple[ShardTraining, object]:
    """(the shard's training side, its evaluation distances or None), from the job's cache when it has one."""
    if job.cache is not None:
        impostors, test_d, training = _load_shard_data(job, evaluation, training=True)
        return training, test_d
    split = read_split(job)[0]
    train_d = job.transform.apply(split.train)
    test_d = job.transform.apply(split.test) if evaluation else None
    if test_d is not None:
        test_d.check_distances(f"evaluation distances ({job.shard[-1]})")
    return replace(training_of(job, train_d), index=job.index), test_d
