"""The fields of the ``fpr`` evaluator's rows that both routes compute alike (fpr.py in memory, fpr_sharded.py on a
sharded run): the class-bootstrap interval of the achieved FPR and the predicted-interval fields."""

from __future__ import annotations

import numpy as np


#: bootstrap replicates for the class-level interval
BOOT_REPLICATES = 1000
#: resampled class indices held in memory at once (replicates x classes)
_BOOT_BLOCK = 2_000_000


#: classes above which a replicate draws only the classes with false accepts (their multinomial counts) and the sum of
#: the other classes' attempts by its normal law: the same resampling, in time that grows with the classes that
#: accept (at a million classes, 9 s a target drawing every class)
LARGE_GALLERY = 20_000
#: classes with false accepts above which (in a large gallery) the ratio's replicates are its normal law instead
MANY_ACCEPTING = 10_000


def class_bootstrap(fa: np.ndarray, imp: np.ndarray, rng: np.random.Generator, level: float = 0.95,
                    replicates: int = BOOT_REPLICATES) -> tuple[float, float]:
    """Percentile interval of ``sum(fa) / sum(imp)`` when whole classes are resampled with replacement.

    ``fa[i]`` and ``imp[i]`` are class i's false accepts and attempts (classes with no attempts
    carry no information and are dropped first). Past LARGE_GALLERY classes, see :func:`_large_gallery`.
    """
    fa = np.asarray(fa, dtype=np.float64)
    imp = np.asarray(imp, dtype=np.float64)
    keep = imp > 0
    fa, imp = fa[keep], imp[keep]
    if imp.size == 0:
        return float("nan"), float("nan")
    if imp.size > LARGE_GALLERY:
        rates = _large_gallery(fa, imp, rng, replicates)
    else:
        chunk = max(1, min(replicates, _BOOT_BLOCK // imp.size))
        rates = []
        for start in range(0, replicates, chunk):
            idx = rng.integers(0, imp.size, size=(min(chunk, replicates - start), imp.size))
            rates.append(fa[idx].sum(axis=1) / imp[idx].sum(axis=1))
        rates = np.concatenate(rates)
    a = (1 - level) / 2
    return float(np.quantile(rates, a)), float(np.quantile(rates, 1 - a))


def _large_gallery(fa: np.ndarray, imp: np.ndarray, rng: np.random.Generator, replicates: int) -> np.ndarray:
    """The class bootstrap's replicates of ``sum(fa) / sum(imp)`` over n > LARGE_GALLERY classes. A resample's counts
    of the K classes with false accepts, and of all the others together (c), are multinomial; the others' attempts
    then sum to c draws from their attempts, whose law at c in the tens of thousands is normal (mean c mu, variance c
    sigma^2). With more than MANY_ACCEPTING classes accepting, the ratio itself is normal, its variance the
    resampling's (n / (n - 1)) sum (fa_i - r imp_i)^2 / (sum imp)^2."""
    n = imp.size
    hit = np.flatnonzero(fa > 0)
    if hit.size > MANY_ACCEPTING:
        r = fa.sum() / imp.sum()
        se = np.sqrt(n / (n - 1) * np.sum((fa - r * imp) ** 2)) / imp.sum()
        return r + se * rng.standard_normal(replicates)
    rest = np.delete(imp, hit)
    counts = rng.multinomial(n, np.r_[np.full(hit.size, 1.0 / n), rest.size / n], size=replicates)
    c = counts[:, -1].astype(np.float64)
    numerator = counts[:, :-1] @ fa[hit]
    denominator = counts[:, :-1] @ imp[hit] + c * rest.mean() + np.sqrt(c) * rest.std() * rng.standard_normal(replicates)
    return numerator / denominator


def _nones(values) -> list:
    return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=np.float64)]


def predictions_fields(preds: list, attempts: list[int], targets: tuple[float, ...], units) -> dict[str, list]:
    """:func:`fpr.predicted_fields` from each fold's Prediction (or None) and ``units()``: the evaluation's probe identities'
    size (calibrate.predicted.clustering.unit_size), read only where the training false accepts cluster."""
    from calibrate.predicted.interval import PREDICTED, column_quantile, combine, combined_cv2, measured_interval

    if not preds or any(p is None for p in preds):
        return {}
    if sum(attempts) == 0:
        return {}
    level = preds[0].level
    reps = combine(preds, attempts)
    cv2 = combined_cv2(preds, attempts)
    low, high = measured_interval(reps, sum(attempts), level, cv2, None if cv2 is None else units())
    t = np.asarray(targets, dtype=np.float64)
    out = {"predicted_fpr_low": _nones(low), "predicted_fpr_high": _nones(high),
           "predicted_ratio_low": _nones(low / t), "predicted_ratio_high": _nones(high / t),
           "predicted_fpr_long_run_low": _nones(column_quantile(reps, (1 - level) / 2)),
           "predicted_fpr_long_run_high": _nones(column_quantile(reps, (1 + level) / 2)),
           "predicted_level": [level] * t.size, "simulated_galleries": [int(reps.shape[0])] * t.size,
           "prediction_simulation": [preds[0].simulation] * t.size}
    statuses = [p.status for p in preds if p.status]
    if statuses:
        # over folds, the first status that gives no interval wins (the combined interval needs every fold's)
        out["prediction_status"] = [next((s[j] for s in statuses if s[j] not in PREDICTED), statuses[0][j])
                                    for j in range(t.size)]
    if preds[0].methods:
        out["confidence_method"] = list(preds[0].methods)
    for what in ("widened", "refitted"):  # galleries a partial draw missed (none, as a rule): said where there are
        count = sum(getattr(p, what, 0) for p in preds)
        if count:
            out[f"simulated_{what}"] = [count] * t.size
    return out


def with_predicted(rows: list[TargetResult], predicted: dict[str, list]) -> None:
    """Each row's extra with its target's predicted fields (:func:`predictions_fields`) and ``predicted_covers``."""
    for k, row in enumerate(rows):
        row.extra.update({key: value[k] for key, value in predicted.items()})
        if row.impostor_attempts and predicted["predicted_fpr_low"][k] is not None:
            row.extra["predicted_covers"] = bool(predicted["predicted_fpr_low"][k] <= row.fpr
                                                 <= predicted["predicted_fpr_high"][k])


def predicted_by_group(rows: list[TargetResult], preds: list, attempts: list[int]) -> None:
    """Each group row's ``predicted_fmr_same_group_low/high`` (the interval for the same-group FMR measured on its
    same-group attempts) and ``predicted_covers``, where every fold's Prediction (``preds``) predicted that group on
    its own (``impostors: same-group``)."""
    from calibrate.predicted.interval import combine, measured_interval

    if not preds or not all(p is not None and p.groups for p in preds):
        return
    for name in preds[0].groups:
        parts = [p.groups.get(name) for p in preds]
        if any(part is None for part in parts):
            continue
        reps = combine(parts, attempts)
        for k, row in enumerate(rows):
            group = (row.extra.get("groups") or {}).get(name)
            n = group and group.get("impostor_attempts_same_group")
            if not n or not np.isfinite(reps[:, k]).any():
                continue
            low, high = measured_interval(reps[:, k:k + 1], n, parts[0].level)
            group.update({"predicted_fmr_same_group_low": float(low[0]), "predicted_fmr_same_group_high": float(high[0]),
                          "predicted_covers": bool(low[0] <= group["fmr_same_group"] <= high[0])})
