"""Dataset ``score-shards``: comparison scores in many files (shards), read where they are used.

``path:`` (or ``train:`` and ``test:``) is a folder or a glob; every matching file is one shard,
in sorted path order. A shard is a Parquet file (``.parquet``, columns as a score-list CSV's:
``claimed_id``, ``real_id``, ``test_label`` (optional), ``score``, or those ``columns:`` names) or a
score list in any of score-list's formats (bob's 4/5 columns, CSV/TSV), read by score-list's own
readers and checks, so a shard's matrix, messages and split are exactly score-list's.

Shards are *partitions of the enrolled classes*: all comparisons of one claimed class are in one
shard (a class found in two shards is an error naming both files). This dataset does not load
anything in the main process: ``load`` returns a :class:`~calibrate.contract.sharded.ShardedScores`,
a list of shards with a picklable reader, and the run (``calibrate/running/sharded.py``) reads every
shard on the executor's workers (once: its first pass saves what the later ones need).

Splitting. With ``train:``/``test:``, the k-th training shard pairs with the k-th evaluation shard
(same claimed classes). With one ``path:``, each shard's impostor rows are split per claimed class
exactly as score-list splits one file (``split_per_class``, keys hashed from ``seed + column``), with
``column`` counted over all shards in order: the shards split as the one score list made by
concatenating them in order would.
"""

from __future__ import annotations

import glob as globmod
from pathlib import Path
from typing import Literal

import numpy as np

from calibrate.contract.base import Dataset, RunContext, ScoreSplit
from calibrate.errors import DataError, ParameterError
from calibrate.contract.sharded import ShardedScores
from calibrate.files.score_lists import ROLES, Comparisons, check_labels, to_floats
from calibrate.files.untrusted import regular_file
from calibrate.contract.types import DistanceMatrix

from .score_list import ScoreListDataset, _first_appearance, build_matrix, read_score_list
from .score_matrix import _drop_failed_columns, split_per_class

PARQUET_SUFFIXES = (".parquet", ".pq")


def shard_files(spec: Path, role: str) -> list[Path]:
    """The shards named by a folder (every regular, non-hidden file in it) or a glob, sorted."""
    text = str(spec)
    if any(ch in text for ch in "*?["):
        files = [Path(p) for p in globmod.glob(text)]
        where = f"the glob {text!r}"
    elif Path(spec).is_dir():
        files = [p for p in Path(spec).iterdir() if not p.name.startswith(".")]
        where = f"the folder {text!r}"
    elif Path(spec).is_file():
        files = [Path(spec)]
        where = text
    else:
        raise DataError(f"{role}: {text!r} is neither a folder, a file nor a glob that exists; give the folder of the "
                        "shards or a glob such as shards/*.parquet")
    files = sorted(p for p in files if p.is_file())
    if not files:
        raise DataError(f"{role}: {where} matches no shard file; give the folder of the shards or a glob such as "
                        "shards/*.parquet")
    return files


def _parquet_rows(path: Path, columns: dict | None) -> Comparisons:
    """A Parquet shard's comparisons as score-list's rows (codes into label lists, file order)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(f"{path}: reading Parquet needs pyarrow: pip install \"calibrate-thresholds[fast-io]\"") from None
    names = {"claimed": "claimed_id", "real": "real_id", "probe": "test_label", "score": "score"}
    if columns:
        names = {role: columns.get(role, names[role] if role != "probe" else None) for role in ROLES}
    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a damaged file
        raise DataError(f"{path}: not a readable Parquet file ({exc}); rewrite the shard or remove it") from None
    if names["probe"] == "test_label" and "test_label" not in schema.names and not columns:
        names["probe"] = None
    wanted = [n for n in names.values() if n is not None]
    missing = [n for n in wanted if n not in schema.names]
    if missing:
        raise DataError(f"{path}: no column {', '.join(map(repr, missing))} (it has {', '.join(schema.names)}); name the "
                        "columns with `columns: {claimed: ..., real: ..., probe: ..., score: ...}`")
    try:
        table = pq.read_table(path, columns=wanted)
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"{path}: cannot read the Parquet shard ({exc}); rewrite the shard or remove it") from None
    if table.num_rows == 0:
        raise DataError(f"{path}: empty shard (no comparisons); remove the file or write its comparisons")

    def labels(role: str) -> tuple[np.ndarray, list[str]]:
        import pyarrow as pa
        import pyarrow.compute as pc

        col = table.column(names[role])
        if col.null_count:
            raise DataError(f"{path}: column {names[role]!r} has {col.null_count} empty (null) label(s); every "
                            "comparison needs its claimed and real class")
        if pa.types.is_dictionary(col.type):
            coded = _dictionary_labels(col)
            if coded is not None:
                return coded
        try:  # hashed in C, labels in order of first appearance (numbers become their text)
            encoded = pc.dictionary_encode(pc.cast(col, pa.string()).combine_chunks())
        except (pa.ArrowException, ValueError) as exc:
            raise DataError(f"{path}: column {names[role]!r} ({col.type}) cannot be read as labels ({exc})") from None
        labels = encoded.dictionary.to_pylist()
        return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64), labels

    claimed, claimed_labels = labels("claimed")
    real, real_labels = labels("real")
    probe = probe_labels = None
    if names["probe"] is not None:
        probe, probe_labels = labels("probe")
    scores = _parquet_scores(path, table.column(names["score"]), names["score"])
    return check_labels(path, Comparisons(claimed, claimed_labels, real, real_labels, probe, probe_labels, scores,
                                          None, unit="row"))


def _dictionary_labels(col) -> tuple[np.ndarray, list[str]] | None:
    """A dictionary-encoded label column (how pyarrow writes repeated labels) as codes and labels in order of first
    appearance, from its dictionary: the labels the general path's cast and re-encoding of every row give (about
    100x faster per shard). None (use the general path) when the dictionary holds a null or, as text, a repeat."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        arr = col.unify_dictionaries().combine_chunks() if col.num_chunks > 1 else col.chunk(0)
        dictionary = arr.dictionary
        if dictionary.null_count:
            return None
        labels = pc.cast(dictionary, pa.string()).to_pylist()
    except (pa.ArrowException, ValueError):
        return None
    if len(set(labels)) != len(labels):
        return None
    codes = np.asarray(arr.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    return _first_appearance(codes, labels)


def _parquet_scores(path: Path, score, name: str) -> np.ndarray:
    """A Parquet score column as float64: numbers as they are, text under the strict number grammar
    (naming the row of the first that is not one: ``0_5`` is not 5.0), any other type refused."""
    import pyarrow as pa

    if score.null_count:
        raise DataError(f"{path}: column {name!r} has {score.null_count} null score(s); mark failed "
                        "comparisons with a number and give it as `missing:`")
    if pa.types.is_string(score.type) or pa.types.is_large_string(score.type):
        texts = score.to_pylist()
        return to_floats(path, texts, range(1, len(texts) + 1), f" (column {name!r})", unit="row")
    if not (pa.types.is_integer(score.type) or pa.types.is_floating(score.type) or pa.types.is_decimal(score.type)):
        raise DataError(f"{path}: column {name!r} is not numeric ({score.type}); write the scores as numbers")
    return np.asarray(score.to_numpy(zero_copy_only=False), dtype=np.float64)


class ScoreShards(Dataset):
    """Comparison scores sharded over many files (Parquet or score lists), read by the workers, one partition per shard.

    :param path: folder or glob of shards, each split per claimed class into fit and evaluation rows (see fit_fraction, seed).
    :param train: folder or glob of shards used for fitting (with test; instead of path).
    :param test: folder or glob of shards used for evaluation (with train); the k-th pairs with the k-th training shard.
    :param format: auto (Parquet by the .parquet/.pq suffix, else score-list's sniffing), parquet, 4-column, 5-column or csv.
    :param columns: Parquet and csv: column names {claimed, real, probe, score} (default claimed_id, real_id, test_label if present, score).
    :param delimiter: csv only: the field separator (default: from the header line).
    :param kind: similarity (higher = more alike) or distance (lower = more alike).
    :param missing: marker score of failed comparisons (e.g. -1); excluded and counted.
    :param fit_fraction: share of each claimed class's impostor rows used for fitting (path only).
    :param seed: seed of the per-class split (path only).
    :param reader: score-list shards: auto (pyarrow when installed), pyarrow or python.
    """

    produces = "scores"
    sharded = True

    def __init__(self, *, path: Path | None = None, train: Path | None = None, test: Path | None = None,
                 format: Literal["auto", "parquet", "4-column", "5-column", "csv"] = "auto",
                 columns: dict[str, str] | None = None, delimiter: str | None = None,
                 kind: Literal["similarity", "distance"] = "similarity", missing: float | None = None,
                 fit_fraction: float = 0.5, seed: int = 0, reader: Literal["auto", "pyarrow", "python"] = "auto"):
        # score-list checks every shared parameter (split, columns, delimiter, reader) with its own messages
        checked = ScoreListDataset(path=path, train=train, test=test, format="csv" if format == "parquet" else format,
                                   columns=columns, delimiter=delimiter, kind=kind, missing=missing,
                                   fit_fraction=fit_fraction, seed=seed, reader=reader)
        if format == "parquet" and delimiter is not None:
            raise ParameterError("`delimiter:` is for csv shards; a Parquet file has typed columns")
        self.path, self.train, self.test = path, train, test
        self.format, self.columns, self.delimiter, self.reader = format, checked.columns, checked.delimiter, reader
        self.kind, self.missing, self.fit_fraction, self.seed = kind, missing, fit_fraction, seed

    def output_kind(self) -> str | None:
        return self.kind

    def _files(self) -> tuple[list[Path], list[Path] | None]:
        if self.path is not None:
            return shard_files(self.path, "path"), None
        train, test = shard_files(self.train, "train"), shard_files(self.test, "test")
        if len(train) != len(test):
            raise DataError(f"train: {len(train)} shards but test: {len(test)}; the k-th training shard pairs with the "
                            "k-th evaluation shard, so give as many of each")
        return train, test

    def check(self) -> None:
        """List the shards and read the head of the first one (the whole run reads every shard on the workers)."""
        train, test = self._files()
        for path in [train[0]] + ([test[0]] if test else []):
            self._read(path, max_rows=200)

    def _read(self, path: Path, max_rows: int | None = None):
        regular_file(Path(path), "the shard", "shards are score files (Parquet or score lists)")
        fmt = self.format
        if fmt == "parquet" or (fmt == "auto" and path.suffix.lower() in PARQUET_SUFFIXES):
            rows = _parquet_rows(path, self.columns)
            return build_matrix(rows, path, "csv", self.missing)
        return read_score_list(path, fmt=fmt, delimiter=self.delimiter, columns=self.columns, missing=self.missing,
                               reader=self.reader, max_rows=max_rows)

    def _load(self, context: RunContext) -> ShardedScores:
        train, test = self._files()
        shards = tuple((str(a), str(b)) if test else (str(a),) for a, b in zip(train, test or train))
        return ShardedScores(self, shards, self.kind)

    @property
    def offsets_matter(self) -> bool:
        """Only the per-class split of ``path:`` shards needs the classes counted in the shards before each."""
        return self.path is not None

    def shard_columns(self, shard: tuple[str, ...]) -> int:
        """The claimed classes of one shard (its count only; for a Parquet shard only that column is read)."""
        path = Path(shard[0])
        if self.format == "parquet" or (self.format == "auto" and path.suffix.lower() in PARQUET_SUFFIXES):
            try:
                import pyarrow.compute as pc
                import pyarrow.parquet as pq

                column = pq.read_table(path, columns=[(self.columns or {}).get("claimed", "claimed_id")]).column(0)
                return int(pc.count_distinct(column).as_py())
            except Exception:  # noqa: BLE001 - the full read says what is wrong, with its message
                pass
        return len(self._read(path).gallery)

    # ---- run on the workers, one shard at a time -------------------------------------------------

    def read_shard(self, shard: tuple[str, ...], column_offset: int) -> tuple[ScoreSplit, int, int, list[str]]:
        """(split, claimed classes before dead ones were dropped, absent pairs, notes) of one shard;
        ``column_offset``: claimed classes in the shards before it (the split's seeds continue across shards)."""
        split, columns, absent = self._split(shard, column_offset)
        context = RunContext()
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            split = _drop_failed_columns(split, context)
        notes = [f"{Path(shard[0]).name}: {n}" for n in context.notes]
        if absent:
            notes.append(f"{Path(shard[0]).name}: {absent} probe x claimed class pair(s) have no comparison; they are "
                         "left out (not counted as failed comparisons)")
        return split, columns, absent, notes

    def _split(self, shard: tuple[str, ...], column_offset: int) -> tuple[ScoreSplit, int, int]:
        if len(shard) == 1:
            path = Path(shard[0])
            m = self._read(path)
            fit, evaluate = split_per_class(m.valid, m.probe_classes, m.gallery, self.fit_fraction,
                                            self.seed + column_offset)
            train = DistanceMatrix(m.values, m.probe_classes, m.gallery, fit, self.kind, m.probe_ids,
                                   source=f"{path} (fit rows)")
            test = DistanceMatrix(m.values, m.probe_classes, m.gallery, evaluate, self.kind, m.probe_ids,
                                  source=f"{path} (evaluation rows)")
            return (ScoreSplit(train, test, m.failed, path.name, ((path.name, m.failed),)), len(m.gallery),
                    m.absent)
        tr_path, te_path = Path(shard[0]), Path(shard[1])
        tr, te = self._read(tr_path), self._read(te_path)
        if set(tr.gallery.tolist()) != set(te.gallery.tolist()):
            only = sorted(set(tr.gallery.tolist()) ^ set(te.gallery.tolist()))
            raise DataError(f"{tr_path} and {te_path} (training and evaluation shard {tr_path.name}) have different "
                            f"claimed classes (e.g. {only[:3]}); paired shards must enroll the same classes")
        position = {c: j for j, c in enumerate(te.gallery.tolist())}
        order = np.array([position[c] for c in tr.gallery.tolist()], np.int64)
        train = DistanceMatrix(tr.values, tr.probe_classes, tr.gallery, tr.valid, self.kind, tr.probe_ids,
                               source=str(tr_path))
        test = DistanceMatrix(te.values[:, order], te.probe_classes, tr.gallery, te.valid[:, order], self.kind,
                              te.probe_ids, source=str(te_path))
        by_file = ((tr_path.name, tr.failed), (te_path.name, te.failed))
        return ScoreSplit(train, test, tr.failed + te.failed, tr_path.name, by_file), len(tr.gallery), tr.absent + te.absent

