"""The reference world's tail check and refit on the generators that reproduce the face matcher's
contradiction (benchmarks/noise_floor.py TAIL_SETTINGS; docs/world-fit.md shows the old world's
misfit): per gallery the tail model chosen, each target's status, the world's FPR over the training
FPR at auto's thresholds, and whether the interval covers the exact true FPR (None: no interval).

    .venv/bin/python benchmarks/world_refit_check.py
"""
from pathlib import Path
import sys, numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parent))
import noise_floor as nf
from calibrate.contract.manager import build_registry
from calibrate.predicted.interval import PredictionSettings, build_world, predict_together
T = np.array(nf.TARGETS)
est = build_registry().get("estimators", "auto").factory()
settings = {s.name: s for s in nf.TAIL_SETTINGS}
for name in ["floor-beta0.25", "floor-beta0.5", "cap-zero"]:
    for r in range(3):
        g = settings[name].gallery(np.random.default_rng([2014, r]), 500, 258)
        imp = g.training()
        model = est.fit(imp)
        w = build_world(imp)
        p = predict_together([est], [model], imp, T, settings=PredictionSettings(), seed=[r], world=w)[0]
        true = nf.true_fpr_scores(g, model.thresholds(tuple(T)).values)
        cover = [(lo <= t <= hi) if np.isfinite(lo) else None for lo, hi, t in zip(p.low, p.high, true)]
        print(name, r, w.tail_model, p.status, [round(c["world_fpr"]/max(c["empirical_fpr"],1e-12),2) for c in p.checks], cover)
