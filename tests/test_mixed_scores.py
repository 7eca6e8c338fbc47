"""Genuine scores given to calibrate.fit as impostor ones (issue 41): the check fires on a mix and is silent on
impostor scores alone (calibrate.statistics.mixture, on generated data with fixed seeds); calibrate.fit refuses or
warns in one line naming the fix; a call that says neither real= nor impostors_only=True is told both."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

import calibrate
from calibrate.cli.commands import app
from calibrate.errors import ParameterError
from calibrate.statistics.mixture import MIN_CLASSES, MixedScores, MixedScoresWarning, mixed_scores

from calibrate_test_helpers import DATA

CLASSES = 200


def _similarities(seed: int, per_class: int = 400):
    """examples/embed.py's matcher: impostor similarities N(35 + class offset, 9) in [0, 100]; genuine N(80, 8)."""
    rng = np.random.default_rng(seed)
    imp = np.clip(rng.normal(35, 9, (per_class, CLASSES)) + rng.normal(0, 4, CLASSES), 0, 100)
    return imp.ravel(), np.tile(np.arange(CLASSES), per_class), lambda n: np.clip(rng.normal(80, 8, n), 0, 100)


def _integers(seed: int, per_class: int = 500):
    """A fingerprint-like matcher: integer similarities (many ties), impostors Poisson(7 + class offset), genuine
    spread over 20..200."""
    rng = np.random.default_rng(seed)
    imp = rng.poisson(7 + rng.integers(0, 4, CLASSES), (per_class, CLASSES)).astype(float)
    return imp.ravel(), np.tile(np.arange(CLASSES), per_class), lambda n: rng.integers(20, 200, n).astype(float)


def _distances(seed: int, per_class: int = 400):
    """Gamma distances of class-specific shape and scale; genuine distances 4 impostor sd below the class's mean."""
    rng = np.random.default_rng(seed)
    shape, scale = rng.uniform(20, 200, CLASSES), rng.uniform(0.5, 2, CLASSES)
    imp = rng.gamma(shape, scale / shape, (per_class, CLASSES))
    sd = scale / np.sqrt(shape)

    def genuine(n):
        c = rng.integers(0, CLASSES, n)
        return np.maximum(scale[c] - 4 * sd[c] + rng.normal(0, 1, n) * sd[c], 0), c
    return imp.ravel(), np.tile(np.arange(CLASSES), per_class), genuine


def _mixed(make, seed: int, per: int):
    """Impostor scores with 1 genuine per ``per`` of them, each of a random class."""
    imp, codes, genuine = make(seed)
    n = imp.size // per
    drawn = genuine(n)
    values, classes = drawn if isinstance(drawn, tuple) else (drawn, np.random.default_rng(seed).integers(0, CLASSES, n))
    return np.r_[imp, values], np.r_[codes, classes]


GENERATORS = {"similarity": (_similarities, "similarity"), "integer": (_integers, "similarity"),
              "distance": (_distances, "distance")}


@pytest.mark.parametrize("name", sorted(GENERATORS))
@pytest.mark.parametrize("seed", [1, 2])
def test_silent_on_impostor_scores_alone(name, seed):
    make, kind = GENERATORS[name]
    imp, codes, _ = make(seed)
    found = mixed_scores(imp, codes, kind)
    assert not found.fired, found


@pytest.mark.parametrize("name", sorted(GENERATORS))
@pytest.mark.parametrize("per", [100, 500])
def test_fires_on_genuine_scores_mixed_in(name, per):
    make, kind = GENERATORS[name]
    scores, codes = _mixed(make, 3, per)
    found = mixed_scores(scores, codes, kind)
    assert found.fired, found
    assert found.classes >= MIN_CLASSES and "genuine and impostor comparisons mixed" in found.finding()


def test_a_few_classes_with_far_tails_of_their_own_are_not_a_mix():
    """Templates that many impostors match (a far tail in a few classes) are not a mode that recurs across classes;
    genuine scores in every class still are."""
    rng = np.random.default_rng(5)
    imp, codes, genuine = _similarities(5)
    wolves = np.isin(codes, [3, 50, 120]) & (rng.random(imp.size) < 0.3)
    imp = np.where(wolves, rng.normal(75, 6, imp.size), imp)
    assert not mixed_scores(imp, codes, "similarity").fired
    n = imp.size // 300
    assert mixed_scores(np.r_[imp, genuine(n)], np.r_[codes, rng.integers(0, CLASSES, n)], "similarity").fired


def test_too_few_classes_or_scores_are_not_judged():
    scores, codes = _mixed(_similarities, 4, 50)
    few = codes < MIN_CLASSES - 1
    assert not mixed_scores(scores[few], codes[few], "similarity").fired
    assert not mixed_scores(scores[:300], codes[:300], "similarity").fired


@pytest.mark.shared_data
@pytest.mark.parametrize("name", ["face-C", "finger-left"])
def test_bssr1_impostor_entries_are_not_a_mix_and_with_the_diagonal_they_are(name):
    """Real matchers (NIST BSSR1 set 1, 517 x 517, the diagonal genuine; face C's failed column left out):
    silent on the impostor entries, fired with the 517 genuine ones among them (1 per 516)."""
    path = DATA / "bssr1-set1" / f"{name}.csv"
    if not path.is_file():
        pytest.skip(f"{path} is absent (real data: ../shared/data)")
    m = np.loadtxt(path, delimiter=",", skiprows=1, usecols=range(1, 518))
    codes = np.broadcast_to(np.arange(m.shape[1]), m.shape)
    keep = ~(m == -1).all(axis=0)[None, :] & np.ones(m.shape, bool)
    impostor = keep & ~np.eye(m.shape[0], dtype=bool)
    assert not mixed_scores(m[impostor], codes[impostor], "similarity").fired
    assert mixed_scores(m[keep], codes[keep], "similarity").fired


def _named(codes):
    return np.char.add("p", np.asarray(codes).astype(str))


def test_fit_refuses_a_mix_in_one_line_naming_both_forms():
    scores, codes = _mixed(_similarities, 6, 300)
    classes = _named(codes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with pytest.raises(MixedScores) as info:
            calibrate.fit(scores, classes, kind="similarity")
        message = str(info.value)
        assert "\n" not in message and "genuine and impostor comparisons mixed" in message
        assert "pass real=" in message and "impostors_only=True" in message
        per_class = {c: scores[classes == c] for c in np.unique(classes)}  # the mapping form, likewise
        with pytest.raises(MixedScores, match="pass real="):
            calibrate.fit(per_class, kind="similarity")


def test_fit_with_impostors_only_warns_about_a_mix_in_one_line():
    scores, codes = _mixed(_similarities, 6, 300)
    with pytest.warns(MixedScoresWarning) as caught:
        cal = calibrate.fit(scores, _named(codes), kind="similarity", impostors_only=True, estimator="class-interp")
    said = [str(w.message) for w in caught if issubclass(w.category, MixedScoresWarning)]
    assert len(said) == 1 and "\n" not in said[0] and "impostors_only=True, yet" in said[0] and "pass real=" in said[0]
    assert len(cal) == CLASSES


def test_fit_with_real_ids_spelled_apart_refuses_a_mix():
    """real= that never equals classes makes every score an impostor's: the same check, its fix the ids."""
    imp, codes, genuine = _similarities(7)
    n = imp.size // 300
    g_codes = np.random.default_rng(7).integers(0, CLASSES, n)
    scores, claimed = np.r_[imp, genuine(n)], _named(np.r_[codes, g_codes])
    real = np.full(scores.size, "unknown")  # a placeholder: no real id is ever a claimed one
    with pytest.raises(MixedScores, match="real= never equals classes.*write real= with the ids of classes"):
        calibrate.fit(scores, claimed, real=real, kind="similarity")
    fixed = np.r_[np.full(imp.size, "stranger"), _named(g_codes)]  # the documented form: genuine ones left out
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixedScoresWarning)
        warnings.simplefilter("error", FutureWarning)
        cal = calibrate.fit(scores, claimed, real=fixed, kind="similarity", estimator="class-interp")
        alone = calibrate.fit(imp, _named(codes), kind="similarity", estimator="class-interp", impostors_only=True)
    for cls in ("p0", "p77", "p199"):
        assert cal.threshold(cls, 0.001) == pytest.approx(alone.threshold(cls, 0.001), rel=1e-12)


def test_a_call_that_says_neither_form_is_told_both():
    imp, codes, _ = _similarities(8, per_class=60)
    with pytest.warns(FutureWarning, match=r"real= .*or impostors_only=True"):
        calibrate.fit(imp, _named(codes), kind="similarity", estimator="class-interp")
    with pytest.warns(FutureWarning, match="impostors_only=True"):
        calibrate.fit({"a": imp[:500], "b": imp[500:1000]}, kind="similarity", estimator="class-interp")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        calibrate.fit(imp, _named(codes), kind="similarity", estimator="class-interp", impostors_only=True)


def test_impostors_only_contradicted_by_real_ids_or_not_a_bool_is_refused():
    scores = np.array([0.9, 0.2, 0.3, 0.1])
    claimed, real = np.array(["a", "a", "b", "b"]), np.array(["a", "b", "a", "a"])
    with pytest.raises(ParameterError, match="impostors_only=True, but real= makes 1 of the 4 comparisons genuine"):
        calibrate.fit(scores, claimed, real=real, kind="similarity", impostors_only=True)
    with pytest.raises(ParameterError, match="impostors_only must be True or False"):
        calibrate.fit(scores, claimed, kind="similarity", impostors_only="yes")


def _score_list(path, real_of):
    """A bob 4-column list of the embed-like matcher with 1 genuine per 300 impostor comparisons; ``real_of`` names
    a genuine probe's real id from its class."""
    imp, codes, genuine = _similarities(9, per_class=150)
    n = imp.size // 300
    g_codes = np.random.default_rng(9).integers(0, CLASSES, n)
    lines = [f"p{c} stranger{k} probe{k} {s:.4f}" for k, (c, s) in enumerate(zip(codes, imp))]
    lines += [f"p{c} {real_of(c)} g{k} {s:.4f}" for k, (c, s) in enumerate(zip(g_codes, genuine(n)))]
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    return path


def test_calibrate_fit_on_a_list_whose_ids_never_meet_refuses_a_mix(tmp_path):
    runner = CliRunner()
    apart = _score_list(tmp_path / "apart.txt", lambda c: "unknown")
    out = tmp_path / "cal.json"
    refused = runner.invoke(app, ["fit", str(apart), "--out", str(out), "--no-predict", "-q"])
    assert refused.exit_code == 2, refused.output
    line = refused.output.strip()
    assert "\n" not in line and "genuine and impostor comparisons mixed" in line and "--impostors-only" in line
    assert not out.exists()
    said = runner.invoke(app, ["fit", str(apart), "--out", str(out), "--no-predict", "-q", "--impostors-only"])
    assert said.exit_code == 0, said.output
    assert "--impostors-only, yet the scores look like genuine and impostor comparisons mixed" in said.output
    same = _score_list(tmp_path / "same.txt", lambda c: f"p{c}")  # the ids meet: genuine ones left out, no note
    fitted = runner.invoke(app, ["fit", str(same), "--out", str(out), "--no-predict", "-q"])
    assert fitted.exit_code == 0 and "mixed" not in fitted.output, fitted.output
    contradicted = runner.invoke(app, ["fit", str(same), "--out", str(out), "--no-predict", "-q", "--impostors-only"])
    assert contradicted.exit_code == 2 and "leave out --impostors-only" in contradicted.output
