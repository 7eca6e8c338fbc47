"""calibrate's built-in plugins, registered through the ``calibrate`` entry-point group exactly
as a third-party plugin package registers its own."""

from __future__ import annotations

from calibrate.hookspecs import hookimpl


@hookimpl
def calibrate_register_datasets(register):
    from .npz_patterns import NpzPatterns
    from .score_matrix import ScoreMatrixDataset
    from .synthetic import SyntheticPatterns

    register("npz-patterns", NpzPatterns)
    register("score-matrix", ScoreMatrixDataset)
    register("synthetic-patterns", SyntheticPatterns)
    from .synthetic_impostors import SyntheticImpostors; register("synthetic-impostors", SyntheticImpostors)  # noqa: E702
    from .image_sets import ExtendedYaleB, ImageSets

    register("image-sets", ImageSets)
    register("extended-yale-b", ExtendedYaleB)


@hookimpl
def calibrate_register_distances(register):
    from .euclidean import Euclidean

    register("euclidean", Euclidean)
    from .mutual_subspace import MutualSubspace

    register("mutual-subspace", MutualSubspace)


@hookimpl
def calibrate_register_transforms(register):
    from .transforms import Identity, SimilarityToDistance

    register("identity", Identity)
    register("similarity-to-distance", SimilarityToDistance)
    from .logit import NegLogComplement, ShiftedLogit

    register("neg-log-complement", NegLogComplement)
    register("shifted-logit", ShiftedLogit)


@hookimpl
def calibrate_register_estimators(register):
    from .interp import ClassInterp, GenericInterp
    from .ncx2_grid import Ncx2Grid

    register("generic-interp", GenericInterp)
    register("class-interp", ClassInterp)
    register("ncx2-grid", Ncx2Grid)
    from .auto import Auto
    from .gpd_tail import GpdTail
    from .ncx2_tail import Ncx2Cv, Ncx2Tail
    from .shrinkage import Shrinkage
    from .znorm import Znorm

    register("gpd-tail", GpdTail)
    register("znorm", Znorm)
    register("shrinkage", Shrinkage)
    register("ncx2-tail", Ncx2Tail)
    register("ncx2-cv", Ncx2Cv)
    register("auto", Auto)


@hookimpl
def calibrate_register_evaluators(register):
    from .fpr import FprEvaluator

    register("fpr", FprEvaluator)


@hookimpl
def calibrate_register_executors(register):
    from .executors import Dask, Processes, Serial

    register("serial", Serial)
    register("processes", Processes)
    register("dask", Dask)
