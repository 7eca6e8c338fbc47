"""Embedding calibrate in a verification system: fit from arrays, save, load, enroll, decide.

    .venv/bin/python examples/embed.py

No files needed: a seeded synthetic matcher with similarity scores in [0, 100]. Every number the
script prints is computed here.
"""

from __future__ import annotations

import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import calibrate

rng = np.random.default_rng(2026)
TARGET = 0.001  # 1 false accept in 1,000 impostor attempts


people = [f"person-{i:03d}" for i in range(200)]
# each enrollee's impostor scores sit a little higher or lower (some people look like many others)
offset = dict(zip(people + ["newcomer"], rng.normal(0, 4, len(people) + 1)))


def impostor_scores(person, n: int) -> np.ndarray:
    """A matcher's similarity scores between an enrollee and people who are not them."""
    return np.clip(rng.normal(35, 9, n) + np.vectorize(offset.get)(np.broadcast_to(person, (n,))), 0, 100)


def genuine_scores(n: int) -> np.ndarray:
    """The matcher's similarity scores between two images of the same person."""
    return np.clip(rng.normal(80, 8, n), 0, 100)


# 1. Fit from what a system holds in memory: every comparison's score, claimed (enrolled) class and the probe's
#    real class. Here 400 impostor attempts per person (probes of other people) and 2 genuine ones.
classes = np.concatenate([np.repeat(people, 400), np.repeat(people, 2)])
scores = np.concatenate([impostor_scores(p, 400) for p in people] + [genuine_scores(2 * len(people))])
others = rng.integers(1, len(people), 400 * len(people))  # each impostor probe's real class: someone else
real = np.concatenate([np.asarray(people)[(np.repeat(np.arange(len(people)), 400) + others) % len(people)],
                       np.repeat(people, 2)])
cal = calibrate.fit(scores, classes, real=real, kind="similarity", estimator="auto", targets=[TARGET], predict=True)
print(cal)
try:  # the same scores without real=: every one would be fitted as an impostor's, so fit refuses
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # it says to pass real= or impostors_only=True, as below
        calibrate.fit(scores, classes, kind="similarity", targets=[TARGET])
except calibrate.errors.DataError as exc:
    print(f"without real=: {exc}")
print(f"threshold of person-007 at FPR {TARGET}: accept when score >= {cal.threshold('person-007', TARGET):.3f}")
low, high = cal.predicted_fpr(TARGET)  # from the training scores alone, before any evaluation
print(f"predicted FPR of these thresholds (90%): {low:.5f} to {high:.5f}")

# 2. Save (JSON, no pickle) and load, as a service would at start-up.
with tempfile.TemporaryDirectory() as tmp:
    path = cal.save(Path(tmp) / "face.calibration.json")
    cal = calibrate.load(path)
    print(f"loaded {path.name}: {len(cal)} classes, accept if {cal.accept_if}, trained on {cal.fingerprint[:19]}...")

    # 3. A new person enrolls: only their own impostor scores are needed; nobody else is refitted.
    cal.enroll("newcomer", impostor_scores("newcomer", 400))
    print(f"newcomer enrolled: accept when score >= {cal.threshold('newcomer', TARGET):.3f}")
    cal.save(path)

# 4. Decide a batch of claims: claimed identity and score of each attempt.
n = 1_000_000
claimed = rng.choice(people + ["newcomer"], n)
attempts = np.concatenate([impostor_scores(claimed[: n // 2], n // 2),   # impostors claiming to be someone
                           rng.normal(80, 8, n - n // 2)])              # then genuine users
start = time.perf_counter()
decisions = cal.accept(claimed, attempts, TARGET)
seconds = time.perf_counter() - start
print(f"{n:,} decisions in {seconds:.3f} s ({n / seconds:,.0f} per second)")
print(f"impostors accepted: {decisions[: n // 2].mean():.5f} (target {TARGET}); genuine accepted: {decisions[n // 2:].mean():.4f}")

# 4b. A system that keeps class codes, not names: resolve the names once, then decide on codes at memory speed.
codes = cal.codes(claimed)        # once: each name's position in cal.classes
decide = cal.decider(TARGET)      # once per target: a threshold per code, in score units
start = time.perf_counter()
coded = decide(codes, attempts)
seconds = time.perf_counter() - start
print(f"on class codes: {n:,} decisions in {seconds * 1e3:.1f} ms ({n / seconds:,.0f} per second); "
      f"the same decisions: {np.array_equal(coded, decisions)}")

# 5. Where a promise matters more than the FNR: thresholds that exceed the target with probability <= 5%.
strict = calibrate.fit(scores, classes, real=real, kind="similarity", targets=[TARGET], confidence=0.95)
fitted = claimed[: n // 2] != "newcomer"  # the claims on the people it was fitted on
strict_decisions = strict.accept(claimed[: n // 2][fitted], attempts[: n // 2][fitted], TARGET)
low, high = strict.predicted_fpr(TARGET)
print(f"{strict.label}: impostors accepted {strict_decisions.mean():.5f} (target {TARGET}; predicted 90%: {low:.5f} to {high:.5f})")
