"""Write the small bob 4-column score lists of this example: scores-dev and scores-eval.

    .venv/bin/python examples/bob-scores/make_scores.py

Each line is `claimed_id real_id test_label score` (bob.bio's 4-column format): 30 enrolled
subjects, every probe compared with every subject; 4 probes per subject in each file, plus 10
probes of subjects nobody enrolled (impostors only). Similarity scores in [0, 1] (genuine
higher), 4 decimals; a few comparisons failed (score -1, the recipe's `missing:`). Seeded, so the
files are the same on every run.
"""

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SUBJECTS = [f"subj{k:02d}" for k in range(30)]


def write(path: Path, group: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    probes = [(s, f"{s}/{group}_{n}") for s in SUBJECTS for n in range(4)]
    probes += [(f"unknown{k:02d}", f"unknown{k:02d}/{group}_0") for k in range(10)]
    lines = []
    for real, label in probes:
        for claimed in SUBJECTS:
            score = rng.beta(6, 2) if claimed == real else rng.beta(2, 5)
            text = "-1" if rng.random() < 0.002 else f"{score:.4f}"
            lines.append(f"{claimed} {real} {label} {text}\n")
    path.write_text("".join(lines), encoding="ascii")


if __name__ == "__main__":
    write(HERE / "scores-dev", "dev", seed=20)
    write(HERE / "scores-eval", "eval", seed=21)
