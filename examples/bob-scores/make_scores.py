"""Write the small bob 4-column score lists of this example: scores-dev and scores-eval, and the
cohort files of the normalised recipe (snorm.yaml): cohort-znorm and cohort-tnorm.

    .venv/bin/python examples/bob-scores/make_scores.py

Each line is `claimed_id real_id test_label score` (bob.bio's 4-column format): 30 enrolled
subjects, every probe compared with every subject; 4 probes per subject in each file, plus 10
probes of subjects nobody enrolled (impostors only). Similarity scores in [0, 1] (genuine
higher), 4 decimals; a few comparisons failed (score -1, the recipe's `missing:`). Seeded, so the
files are the same on every run.

The cohort is 20 other people (`cohort00` ... `cohort19`), in bob's ZT-norm layout:
cohort-znorm holds the enrolled side (models x Z-probes: every subject's model against 2 probes of
each cohort person) and cohort-tnorm the probe side (T-models x probes: every cohort person's model
against every probe of scores-dev and scores-eval). Their scores are impostor scores as above.
"""

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SUBJECTS = [f"subj{k:02d}" for k in range(30)]


COHORT = [f"cohort{k:02d}" for k in range(20)]


def probes(group: str) -> list[tuple[str, str]]:
    """(real class, probe label) of every probe of one file."""
    out = [(s, f"{s}/{group}_{n}") for s in SUBJECTS for n in range(4)]
    return out + [(f"unknown{k:02d}", f"unknown{k:02d}/{group}_0") for k in range(10)]


def write(path: Path, group: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    lines = []
    for real, label in probes(group):
        for claimed in SUBJECTS:
            score = rng.beta(6, 2) if claimed == real else rng.beta(2, 5)
            text = "-1" if rng.random() < 0.002 else f"{score:.4f}"
            lines.append(f"{claimed} {real} {label} {text}\n")
    path.write_text("".join(lines), encoding="ascii")


def write_cohorts(znorm: Path, tnorm: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    z_probes = [(c, f"{c}/z_{n}") for c in COHORT for n in range(2)]
    lines = [f"{model} {real} {label} {rng.beta(2, 5):.4f}\n" for model in SUBJECTS for real, label in z_probes]
    znorm.write_text("".join(lines), encoding="ascii")
    lines = [f"{model} {real} {label} {rng.beta(2, 5):.4f}\n"
             for group in ("dev", "eval") for real, label in probes(group) for model in COHORT]
    tnorm.write_text("".join(lines), encoding="ascii")


if __name__ == "__main__":
    write(HERE / "scores-dev", "dev", seed=20)
    write(HERE / "scores-eval", "eval", seed=21)
    write_cohorts(HERE / "cohort-znorm", HERE / "cohort-tnorm", seed=22)
