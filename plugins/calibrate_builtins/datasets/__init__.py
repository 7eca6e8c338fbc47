"""Datasets: where patterns or comparison scores come from."""

from __future__ import annotations

from calibrate.contract.hookspecs import RegisterDataset, hookimpl


@hookimpl
def calibrate_register_datasets(register: RegisterDataset) -> None:
    from .genuine_impostor import GenuineImpostorFiles
    from .image_sets import ExtendedYaleB, ImageSets
    from .npz_patterns import NpzPatterns
    from .score_list import ScoreListDataset
    from .score_matrix import ScoreMatrixDataset
    from .score_shards import ScoreShards
    from .synthetic_groups import SyntheticGroups
    from .synthetic_impostors import SyntheticImpostors
    from .synthetic_patterns import SyntheticPatterns

    register("npz-patterns", NpzPatterns)
    register("score-matrix", ScoreMatrixDataset)
    register("score-list", ScoreListDataset)
    register("score-shards", ScoreShards)
    register("genuine-impostor", GenuineImpostorFiles)
    register("synthetic-patterns", SyntheticPatterns)
    register("synthetic-impostors", SyntheticImpostors)
    register("synthetic-groups", SyntheticGroups)
    register("image-sets", ImageSets)
    register("extended-yale-b", ExtendedYaleB)
