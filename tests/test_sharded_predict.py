"""Predicted FPR intervals in a sharded run (issue 43, part 3): a seeded sample of the classes, its training side
gathered from the shards and predicted as in memory; the evaluation's probe sizes reduced over the shards."""

from __future__ import annotations

import numpy as np

from calibrate.contract.comparisons import DistanceMatrix, ImpostorDistances
from calibrate.contract.shard_data import ShardTraining, training_of
from calibrate.predicted.clustering import probe_units
from calibrate.predicted.clustering import unit_size as unit_size_whole
from calibrate.running.sharded_predict import gathered, probe_attempts, sample_positions, unit_size


class _Job:
    groups = None
    units = True


def _matrix(rng, probes: int, classes: int, prefix: str) -> DistanceMatrix:
    """Distances of ``probes`` rows (probe identities repeating: several images each) to ``classes`` columns, some
    entries missing, one genuine row per class."""
    identities = np.array([f"p{i % (probes // 3)}" for i in range(probes)] + [f"{prefix}{j}" for j in range(classes)])
    values = rng.gamma(4.0, 1.0, size=(identities.size, classes))
    valid = rng.random(values.shape) > 0.1
    return DistanceMatrix(values, identities, np.array([f"{prefix}{j}" for j in range(classes)]), valid, "distance")


def test_sample_positions_draw_k_classes_once_each_by_the_seed_and_every_class_of_a_small_gallery():
    counts = [40, 0, 25, 35]
    a = sample_positions(counts, 7, k=30)
    assert a == {} or sum(v.size for v in a.values()) == 30
    assert all(np.all(np.diff(v) > 0) and v.min() >= 0 and v.max() < counts[i] for i, v in a.items())
    b = sample_positions(counts, 7, k=30)
    assert all(np.array_equal(a[i], b[i]) for i in a) and a.keys() == b.keys()
    c = sample_positions(counts, 8, k=30)
    assert any(not np.array_equal(a.get(i, []), c.get(i, [])) for i in range(4))
    whole = sample_positions(counts, 7, k=100)
    assert {i: v.tolist() for i, v in whole.items()} == {0: list(range(40)), 2: list(range(25)), 3: list(range(35))}


def test_gathered_sample_is_the_whole_gallerys_training_side_and_its_probe_identities():
    rng = np.random.default_rng(43)
    shards = [_matrix(rng, 30, 5, "a"), _matrix(rng, 30, 7, "b")]
    parts = [training_of(_Job(), m) for m in shards]
    picked = [np.array([0, 2, 4]), np.array([1, 6])]
    sample = [p.subset(r) for p, r in zip(parts, picked)]
    impostors, genuine, groups, units = gathered(sample)
    assert groups is None
    # against brute force: each picked column's valid impostor rows, shard by shard
    expected = []
    for m, r in zip(shards, picked):
        for j in r.tolist():
            rows = m.valid[:, j] & (m.probe_classes != m.gallery_classes[j])
            expected.append(m.values[rows, j])
    assert impostors.classes == tuple(c for m, r in zip(shards, picked) for c in m.gallery_classes[r].tolist())
    np.testing.assert_array_equal(impostors.values, np.concatenate(expected))
    np.testing.assert_array_equal(impostors.counts(), [e.size for e in expected])
    own = [m.valid[:, j] & (m.probe_classes == m.gallery_classes[j]) for m, r in zip(shards, picked) for j in r.tolist()]
    np.testing.assert_array_equal(genuine.counts(), [int(o.sum()) for o in own])  # each class's valid genuine row
    # each distance's probe identity: units numbered by name, sizes their distances (as probe_units numbers them)
    probes = np.concatenate([m.probe_classes[(m.valid[:, j] & (m.probe_classes != m.gallery_classes[j]))]
                             for m, r in zip(shards, picked) for j in r.tolist()])
    names, inverse = np.unique(probes, return_inverse=True)
    np.testing.assert_array_equal(units.unit, inverse)
    np.testing.assert_array_equal(units.sizes, np.bincount(inverse))
    one = probe_units(shards[0], ImpostorDistances.from_matrix(shards[0]))
    mine = gathered([parts[0]])[3]
    np.testing.assert_array_equal(mine.sizes, one.sizes)  # a whole shard: the in-memory units


def test_unit_size_reduced_over_shards_is_the_whole_evaluations():
    rng = np.random.default_rng(44)
    shards = [_matrix(rng, 24, 4, "a"), _matrix(rng, 24, 6, "b"), _matrix(rng, 12, 3, "c")]
    reduced = unit_size([probe_attempts(m) for m in shards])
    assert abs(reduced - unit_size_whole(shards)) <= 1e-12 * reduced
    assert unit_size([]) is None


def test_a_subset_keeps_each_distance_with_its_class_group_and_probe():
    rng = np.random.default_rng(45)
    m = _matrix(rng, 18, 6, "z")
    part = training_of(_Job(), m)
    sub = part.subset(np.array([1, 4]))
    assert isinstance(sub, ShardTraining) and sub.impostors.classes == ("z1", "z4")
    for k, j in enumerate((1, 4)):
        rows = m.valid[:, j] & (m.probe_classes != m.gallery_classes[j])
        np.testing.assert_array_equal(sub.impostors.values[sub.impostors.offsets[k]:sub.impostors.offsets[k + 1]],
                                      m.values[rows, j])
        codes = sub.probes[0][sub.impostors.offsets[k]:sub.impostors.offsets[k + 1]]
        np.testing.assert_array_equal(sub.probes[1][codes], m.probe_classes[rows])


def _run(tmp, name: str, data: dict, same_group: bool = False) -> dict:
    """results.json of a run of auto and generic-interp with the predicted intervals on, with the gallery's groups."""
    import json

    from test_partitioned import run

    data = {**data, "kind": "distance", "groups": str(tmp / "groups.csv"),
            **({"impostors": "same-group"} if same_group else {})}
    run(tmp, data, name, (0.01, 0.003), [{"plugin": "auto"}, {"plugin": "generic-interp"}], prediction=True)
    return json.loads((tmp / name / "results.json").read_text(encoding="utf-8"))


PREDICTED = ("predicted_fpr_low", "predicted_fpr_high", "predicted_fpr_long_run_low", "predicted_fpr_long_run_high",
             "simulated_galleries", "predicted_covers", "predicted_fmr_same_group_low", "predicted_fmr_same_group_high")


def _predicted(doc: dict) -> dict:
    out = {}
    for label, est in doc["estimators"].items():
        for k, row in enumerate(est["targets"]):
            out[(label, k)] = {key: row.get(key) for key in PREDICTED}
            for name, g in (row.get("groups") or {}).items():
                out[(label, k, name)] = {key: g.get(key) for key in PREDICTED}
    return out


def _close(a, b) -> bool:
    if isinstance(b, float) and not isinstance(b, bool):
        return a is not None and abs(a - b) <= 1e-9 * max(abs(b), 1e-300)
    return a == b


import pytest  # noqa: E402


@pytest.mark.parametrize("same_group", [False, True])
def test_a_sharded_run_of_a_gallery_within_the_sample_predicts_the_in_memory_intervals(tmp_path, same_group):
    from test_sharded_choice import make_scores

    make_scores(tmp_path / "shards", shards=3, classes=20, probes=60)
    sharded = _run(tmp_path, "sharded", {"plugin": "score-shards", "path": str(tmp_path / "shards")}, same_group)
    memory = _run(tmp_path, "memory", {"plugin": "score-list", "path": str(tmp_path / "all.txt")}, same_group)
    a, b = _predicted(sharded), _predicted(memory)
    assert a.keys() == b.keys()
    assert any(v["predicted_fpr_low"] is not None for v in b.values())
    for key in b:
        assert all(_close(a[key][f], b[key][f]) for f in PREDICTED), (key, a[key], b[key])
    assert any("predicted FPR intervals: from every class" in n for n in sharded["notes"])


def test_a_same_group_sample_is_refitted_with_each_groups_own_chosen_structure(tmp_path, monkeypatch):
    # a gallery larger than the sample: each group's auto keeps the structure the shards chose for that group
    import calibrate.running.sharded as sharded
    import calibrate.saved.grouped as grouped
    from test_sharded_choice import make_scores

    original = sharded.sample_positions
    monkeypatch.setattr(sharded, "sample_positions", lambda counts, seed: original(counts, seed, k=60))
    seen = []
    fit = grouped.fit_by_group

    def spy(*args, **kw):
        model = fit(*args, **kw)
        if all(hasattr(e, "chosen") for e in model.estimators):  # auto's (the run also has generic-interp)
            seen.append({name: e.chosen for (name, _), e in zip(model.parts, model.estimators)})
        return model

    monkeypatch.setattr(grouped, "fit_by_group", spy)
    make_scores(tmp_path / "shards", seed=5, classes=40, probes=300, every=2)
    doc = _run(tmp_path, "sharded", {"plugin": "score-shards", "path": str(tmp_path / "shards")}, same_group=True)
    whole = {n.split(":")[0].removeprefix("group "): n for n in doc["notes"] if "auto chose" in n}
    assert seen and set(seen[0]) == set(whole)
    for name, chosen in seen[0].items():
        assert f"({chosen})" in whole[name], (name, chosen, whole[name])
