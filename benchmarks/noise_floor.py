"""How far the achieved/target FPR ratio strays by chance alone on small image-set galleries.

    /work/.venv/bin/python benchmarks/noise_floor.py            # full run (a few minutes on 2 cores)
    /work/.venv/bin/python benchmarks/noise_floor.py --quick    # tiny run (seconds)
    /work/.venv/bin/python benchmarks/noise_floor.py --out docs/noise-floor.md   # refresh the committed tables

On a gallery of 30-40 enrolled classes every class has only N - 1 training impostor distances
(its enrolled set against the other classes' enrolled sets), so a threshold at a target FPR of
0.1% or 0.05% is extrapolated from ~N^2 / 2 distinct distances; the evaluation then counts a few
false accepts among N (N - 1) (k - 1) attempts. This benchmark measures both sources of chance
on synthetic galleries whose truth is known, so that a ratio read on a small real dataset (e.g.
Extended Yale B) can be judged against the spread that chance alone produces.

Generator (one replicate): N subjects, k set positions (conditions), dimension p. Subject
vectors a_c ~ N(0, I_p), condition vectors b_g ~ N(0, tau^2 I_p), set representation
x_{c,g} = a_c + b_g + eps with eps ~ N(0, s^2 I_p), fresh for every set; distance = Euclidean.
The ``lookalike`` variant replaces ~3% of the subjects by a near copy of another subject
(a_c' = a_c + N(0, 0.3^2 I_p)), a heavier lower tail of the impostor distances.

Tail generators (``TAIL_SETTINGS``, issue 18 item 3: tails the reference world of the predicted
intervals may misread). No geometry: class c's training impostor distances are i.i.d. draws of
``d = exp(m_c + s_c X)`` (``m_c ~ N(-0.8, 0.1^2)``, ``s_c ~ U(0.1, 0.2)``, the ``n - 1`` distances per
class of the geometric galleries unless a caller asks for another count), with a standard shape X
whose lower tail is spliced onto a standard normal below its ``p0``-quantile ``z0`` (or, for
``cap-atom`` and ``mix-class``, per-class laws). Every class CDF is closed form (``Shape.cdf``,
``ScoreGallery.class_cdf``), so the true FPR of a threshold t_c is exactly ``F_c(t_c)``, pooled
over classes (each class one training-sized batch of impostor attempts); the evaluated FPR draws
one fresh batch of the same size per class. See docs/noise-floor.md for one paragraph per generator.

Protocol, as the pipeline's ``enrollment: staggered``: subject i (sorted) enrolls position
i mod k; the training impostor distances of class c are the distances between c's enrolled set
and every other subject's enrolled set; the estimator is fitted through the registry exactly as
the pipeline does. The queries are every subject's sets at its k - 1 other positions; the FPR
pools all (class, impostor query) attempts, as the ``fpr`` evaluator does.

Two ratios per replicate and target e:

* **true** ratio: the expected FPR of the fitted thresholds over fresh query noise, divided by
  e. Given the enrolled set x_c and the query mean m = a_c' + b_g, ||x_c - m - eps||^2 / s^2 is
  non-central chi-square (p degrees of freedom, non-centrality ||x_c - m||^2 / s^2), so the
  probability of a false accept is computed exactly (``scipy.special.chndtr``) instead of by
  Monte Carlo. Its spread is the TRAINING-side chance (estimation error) alone.
* **evaluated** ratio: what a real evaluation reads: one query set (one noise draw) per
  (subject, position), counted against every other class's threshold. Adds the test-side chance.

Prints Markdown tables (per setting, N and estimator: median ratio, 10th-90th percentile and
the share of replicates with the ratio inside [0.67, 1.5], per target and at all targets at once)
and writes them to ``results/noise_floor.md``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.spatial.distance import cdist
from scipy.special import chndtr, ndtr, ndtri

from calibrate.contract.base import RunContext
from calibrate.contract.manager import build_registry
from calibrate.contract.types import ImpostorDistances

ROOT = Path(__file__).resolve().parents[1]
TARGETS = (0.005, 0.0025, 0.001, 0.0005)
BAND = (0.67, 1.5)
ESTIMATORS = ("auto", "generic-interp")


@dataclass(frozen=True)
class Setting:
    """One generator configuration (see the module docstring)."""

    name: str
    tau: float
    s: float
    lookalike: float = 0.0


SETTINGS = (Setting("tau0-s0.3", 0.0, 0.3), Setting("tau0.5-s0.3", 0.5, 0.3),
            Setting("tau0.5-s0.6", 0.5, 0.6), Setting("tau0.5-s0.3-lookalike", 0.5, 0.3, 0.03))


@dataclass(frozen=True)
class Gallery:
    """One synthetic gallery: the query means of every (subject, position) and the enrolled sets."""

    subjects: np.ndarray   # (N, p) subject vectors a_c
    conditions: np.ndarray  # (k, p) condition vectors b_g
    enrolled_pos: np.ndarray  # (N,) position each subject enrolls
    enrolled: np.ndarray   # (N, p) enrolled set representations x_{c, pos(c)}
    s: float

    @property
    def size(self) -> int:
        return self.subjects.shape[0]

    def queries(self) -> tuple[np.ndarray, np.ndarray]:
        """Noise-free means of the query sets, (N (k - 1), p), and the subject index of each."""
        n, k = self.size, self.conditions.shape[0]
        owner, pos = np.divmod(np.arange(n * k), k)
        keep = pos != self.enrolled_pos[owner]
        return self.subjects[owner[keep]] + self.conditions[pos[keep]], owner[keep]


def make_gallery(rng: np.random.Generator, n: int, k: int, p: int, setting: Setting) -> Gallery:
    """Draw subjects, conditions and the enrolled sets (staggered: subject i enrolls position i mod k)."""
    subjects = rng.standard_normal((n, p))
    n_look = round(setting.lookalike * n)
    if n_look:
        copies = rng.choice(n, size=2 * n_look, replace=False)
        subjects[copies[:n_look]] = subjects[copies[n_look:]] + 0.3 * rng.standard_normal((n_look, p))
    conditions = setting.tau * rng.standard_normal((k, p))
    enrolled_pos = np.arange(n) % k
    enrolled = subjects + conditions[enrolled_pos] + setting.s * rng.standard_normal((n, p))
    return Gallery(subjects, conditions, enrolled_pos, enrolled, setting.s)


def class_names(n: int) -> list[str]:
    """Class labels whose sorted order is the subject order (as the staggered enrollment assumes)."""
    return [f"s{i:04d}" for i in range(n)]


def training_impostors(gallery: Gallery) -> ImpostorDistances:
    """Per class: distances from its enrolled set to every other subject's enrolled set."""
    d = cdist(gallery.enrolled, gallery.enrolled)
    n = gallery.size
    off = ~np.eye(n, dtype=bool)
    return ImpostorDistances.from_lists({name: d[i, off[i]] for i, name in enumerate(class_names(n))})


def fit_thresholds(impostors: ImpostorDistances, estimators: dict, targets: tuple[float, ...]) -> dict[str, np.ndarray]:
    """Thresholds (classes x targets) of every estimator, fitted as the pipeline fits them."""
    out = {}
    for label, estimator in estimators.items():
        table = estimator.fit(impostors, RunContext(seed=0)).thresholds(targets)
        if table.classes != impostors.classes:
            raise RuntimeError(f"{label}: threshold table classes are not in the training order")
        out[label] = table.values
    return out


def true_fpr(gallery: Gallery, thresholds: np.ndarray) -> np.ndarray:
    """Expected pooled FPR per target over fresh query noise (exact, non-central chi-square)."""
    means, owner = gallery.queries()
    lam = cdist(gallery.enrolled, means, "sqeuclidean") / gallery.s ** 2       # (classes, queries)
    impostor = owner[None, :] != np.arange(gallery.size)[:, None]
    lam = lam[impostor].reshape(gallery.size, -1)                  # every class has N - 1 impostors x (k - 1)
    p = gallery.enrolled.shape[1]
    x = (thresholds / gallery.s) ** 2                                 # (classes, targets)
    return np.array([chndtr(x[:, [j]], p, lam).mean() for j in range(x.shape[1])])


def evaluated_fpr(gallery: Gallery, thresholds: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Pooled FPR per target from one query set per (subject, position), and the number of attempts."""
    means, owner = gallery.queries()
    queries = means + gallery.s * rng.standard_normal(means.shape)
    d = cdist(queries, gallery.enrolled)                # (queries, classes)
    impostor = owner[:, None] != np.arange(gallery.size)[None, :]
    accept = d[:, :, None] <= thresholds[None, :, :]
    return (accept & impostor[:, :, None]).sum(axis=(0, 1)) / impostor.sum(), int(impostor.sum())


# ---- tail generators (no geometry: per-class laws with closed-form CDFs) -----------------------------


@dataclass(frozen=True)
class Shape:
    """A standard shape X: N(0, 1) above ``z0 = Phi^-1(p0)``, below it ``P(X <= x) = p0 S(z0 - x)`` with the
    tail survival S of the excess ``v = z0 - x >= 0``:

    * ``floor`` (``a``, ``w``): ``S(v) = (1 - v / w)^a`` on [0, w]: a Beta(a, 1) floor, X >= z0 - w
      (bounded; the minimum is in the GPD domain with shape xi = -1 / a);
    * ``logpareto`` (``a``, ``sigma``, ``vmax``): ``S(v) = ((1 + log(1 + v / sigma))^-a - c) / (1 - c)``,
      c its value at vmax (slowly varying, heavier than any GPD, truncated at vmax so distances stay > 0);
    * ``normal``: no splice (``p0`` unused);
    * ``mixture`` (``weight``, ``mu``, ``sd``): ``(1 - weight) N(0, 1) + weight N(mu, sd^2)`` (no splice).
    """

    kind: str
    p0: float = 0.02
    a: float = 1.0
    w: float = 0.0
    sigma: float = 1.0
    vmax: float = np.inf
    weight: float = 0.0
    mu: float = 0.0
    sd: float = 1.0

    @property
    def z0(self) -> float:
        return float(ndtri(self.p0))

    def _c(self) -> float:
        return (1.0 + np.log1p(self.vmax / self.sigma)) ** -self.a if np.isfinite(self.vmax) else 0.0

    def tail_survival(self, v: np.ndarray) -> np.ndarray:
        v = np.maximum(v, 0.0)
        if self.kind == "floor":
            return np.clip(1.0 - v / self.w, 0.0, 1.0) ** self.a
        c = self._c()  # logpareto
        return np.clip(((1.0 + np.log1p(v / self.sigma)) ** -self.a - c) / (1.0 - c), 0.0, 1.0)

    def tail_quantile(self, q: np.ndarray) -> np.ndarray:
        """The excess v with ``S(v) = q``."""
        if self.kind == "floor":
            return self.w * (1.0 - q ** (1.0 / self.a))
        c = self._c()
        return self.sigma * np.expm1(np.expm1(np.log(q * (1.0 - c) + c) / -self.a))

    def cdf(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if self.kind == "normal":
            return ndtr(x)
        if self.kind == "mixture":
            return (1.0 - self.weight) * ndtr(x) + self.weight * ndtr((x - self.mu) / self.sd)
        return np.where(x < self.z0, self.p0 * self.tail_survival(self.z0 - x), ndtr(x))

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        if self.kind == "mixture":
            second = rng.random(size) < self.weight
            return np.where(second, self.mu + self.sd * rng.standard_normal(size), rng.standard_normal(size))
        u = rng.random(size)
        if self.kind == "normal":
            return ndtri(u)
        low = u < self.p0
        x = ndtri(np.where(low, 0.5, u))
        x[low] = self.z0 - self.tail_quantile(u[low] / self.p0)
        return x


def _density_matched(p0: float, slope: float) -> float:
    """Width (floor) or sigma (logpareto) that makes the spliced tail's density at z0 the normal's."""
    return p0 * slope / float(np.exp(-0.5 * ndtri(p0) ** 2) / np.sqrt(2 * np.pi))


@dataclass(frozen=True)
class ScoreSetting:
    """A tail generator: class laws ``log d = m_c + s_c X`` with X of ``shape``; ``cap`` > 0: the distances
    are ``max(d, cap * exp(mean m_c))`` (a saturating matcher: a common hard bound with an atom on it);
    ``class_mix`` > 0: that share of the classes draws ``mix_weight ~ U(lo, hi)`` of its distances from
    ``N(mix_mu, mix_sd^2)`` on the X scale (per-class mixtures)."""

    name: str
    shape: Shape
    about: str
    cap_quantile: float = 0.0
    #: ``clip``: d = max(d, b) (an atom on a bound b > 0); ``flip``: d = max(d - b, 0) (the scores' distance
    #: from the matcher's cap, as similarity-to-distance makes it: an atom at 0, positive density above it)
    cap_mode: str = "clip"
    class_mix: float = 0.0
    mix_weight: tuple[float, float] = (0.0, 0.0)
    mix_mu: float = -2.5
    mix_sd: float = 0.5

    def gallery(self, rng: np.random.Generator, n: int, per_class: int | None = None) -> "ScoreGallery":
        per = n - 1 if per_class is None else int(per_class)
        m = rng.normal(-0.8, 0.1, n)
        s = rng.uniform(0.1, 0.2, n)
        weight = np.zeros(n)
        if self.class_mix:
            chosen = rng.random(n) < self.class_mix
            weight[chosen] = rng.uniform(*self.mix_weight, int(chosen.sum()))
        # the cap: the cap_quantile-quantile of an average class (m = -0.8, s = 0.15); per class its mass varies
        bound = float(np.exp(-0.8 + 0.15 * ndtri(self.cap_quantile))) if self.cap_quantile else 0.0
        return ScoreGallery(self, m, s, weight, bound, per, rng.integers(2 ** 63))


@dataclass(frozen=True)
class ScoreGallery:
    """One tail-generator gallery: per-class parameters; training distances drawn from ``seed``."""

    setting: ScoreSetting
    m: np.ndarray
    s: np.ndarray
    weight: np.ndarray
    bound: float
    per_class: int
    seed: int

    @property
    def size(self) -> int:
        return self.m.size

    def _draw_x(self, rng: np.random.Generator, i: int, size: int) -> np.ndarray:
        x = self.setting.shape.draw(rng, size)
        if self.weight[i]:
            second = rng.random(size) < self.weight[i]
            x = np.where(second, self.setting.mix_mu + self.setting.mix_sd * rng.standard_normal(size), x)
        return x

    def draw(self, rng: np.random.Generator) -> list[np.ndarray]:
        """Fresh distances, ``per_class`` for every class."""
        out = []
        for i in range(self.size):
            d = np.exp(self.m[i] + self.s[i] * self._draw_x(rng, i, self.per_class))
            out.append(np.maximum(d - self.bound, 0.0) if self.setting.cap_mode == "flip" else np.maximum(d, self.bound))
        return out

    def training(self) -> ImpostorDistances:
        return ImpostorDistances.from_lists(dict(zip(class_names(self.size), self.draw(np.random.default_rng(self.seed)))))

    def class_cdf(self, thresholds: np.ndarray) -> np.ndarray:
        """Exact P(d <= t) per class (rows) for thresholds of shape (classes, targets)."""
        t = np.asarray(thresholds, dtype=np.float64)
        if self.setting.cap_mode == "flip":  # d = max(raw - b, 0): P(d <= t) = P(raw <= t + b) for t >= 0
            return np.where(t < 0, 0.0, self._raw_cdf(t + self.bound))
        return np.where(t < self.bound, 0.0, self._raw_cdf(t))

    def _raw_cdf(self, t: np.ndarray) -> np.ndarray:
        """P(exp(m_c + s_c X) <= t), mixtures included."""
        with np.errstate(divide="ignore"):
            x = (np.log(np.maximum(t, 0.0)) - self.m[:, None]) / self.s[:, None]
        f = self.setting.shape.cdf(x)
        w = self.weight[:, None]
        if np.any(w):
            f = (1.0 - w) * f + w * ndtr((x - self.setting.mix_mu) / self.setting.mix_sd)
        return f


def true_fpr_scores(gallery: ScoreGallery, thresholds: np.ndarray) -> np.ndarray:
    """Exact pooled FPR per target (every class the same number of attempts)."""
    return gallery.class_cdf(thresholds).mean(axis=0)


def evaluated_fpr_scores(gallery: ScoreGallery, thresholds: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Pooled FPR per target on one fresh batch of ``per_class`` impostor distances per class."""
    test = gallery.draw(rng)
    hits = sum((d[:, None] <= thresholds[i][None, :]).sum(axis=0) for i, d in enumerate(test))
    attempts = gallery.size * gallery.per_class
    return hits / attempts, attempts


_P0, _FLOOR_P0 = 0.02, 0.005
TAIL_SETTINGS = (
    ScoreSetting("floor-beta0.5", Shape("floor", _FLOOR_P0, a=0.5, w=1.0),
                 "bounded and saturating: below its 0.5% quantile z0 the shape is a Beta(0.5, 1) floor, "
                 "P(X <= x) = 0.005 (x - x_b)^0.5 on [x_b, z0], x_b = z0 - 1: a thin shelf one standard unit "
                 "long whose density rises to infinity at the hard bound x_b (the minimum's GPD shape is "
                 "xi = -1/a = -2); the bound sits at the same standardised place in every class, so "
                 "d >= exp(m_c + s_c x_b) > 0"),
    ScoreSetting("floor-beta0.25", Shape("floor", _FLOOR_P0, a=0.25, w=1.0),
                 "as floor-beta0.5 with a = 0.25 (xi = -4): more of the lowest 0.5% piled against the bound"),
    ScoreSetting("cap-atom", Shape("normal"),
                 "a saturating matcher: per class log-normal distances (X ~ N(0, 1)) clipped at one common bound "
                 "b = exp(-0.8 + 0.15 Phi^-1(1e-4)) (the 0.01% quantile of an average class): "
                 "d = max(b, exp(m_c + s_c X)); every class has an atom at b whose mass "
                 "Phi((log b - m_c) / s_c) varies by class (pooled about 0.17%; CDF 0 below b)", cap_quantile=1e-4),
    ScoreSetting("cap-zero", Shape("normal"),
                 "a saturating matcher seen through similarity-to-distance (d = cap - score): the cap-atom law "
                 "shifted by its bound, d = max(exp(m_c + s_c X) - b, 0) with the same b, so the saturated "
                 "comparisons are distance 0 (an atom of about 0.17% pooled, CDF F_c(t) = Phi((log(t + b) - m_c) / s_c) "
                 "for t >= 0) with a positive density just above it", cap_quantile=1e-4, cap_mode="flip"),
    ScoreSetting("logpareto", Shape("logpareto", _P0, a=2.0, sigma=_density_matched(_P0, 2.0), vmax=40.0),
                 "heavier than any GPD: below its 2% quantile the excess v = z0 - X has the log-Pareto "
                 "survival (1 + log(1 + v / sigma))^-2 (sigma = 0.83; slowly varying), truncated at v = 40 "
                 "(renormalised) so distances stay positive"),
    ScoreSetting("mix-close3", Shape("mixture", weight=0.03, mu=-2.5, sd=0.5),
                 "every class draws 3% of its impostor distances from a second, closer component: "
                 "X ~ 0.97 N(0, 1) + 0.03 N(-2.5, 0.5^2)"),
    ScoreSetting("mix-class", Shape("normal"),
                 "per-class mixtures: 10% of the classes draw a share w_c ~ U(2%, 10%) of their distances from "
                 "N(-2.5, 0.5^2) on the X scale, the others none (class shapes differ, the pooled shape "
                 "is a mixture)", class_mix=0.1, mix_weight=(0.02, 0.10)),
)


def run_size(setting: Setting, n: int, k: int, p: int, replicates: int, estimators: dict,
             seed: int, setting_index: int) -> dict[str, dict[str, np.ndarray]]:
    """True and evaluated ratios (replicates x targets) per estimator for one setting and size."""
    out = {label: {"true": np.empty((replicates, len(TARGETS))), "eval": np.empty((replicates, len(TARGETS)))}
           for label in estimators}
    targets = np.asarray(TARGETS)
    for r in range(replicates):
        rng = np.random.default_rng([seed, setting_index, n, r])
        tail = isinstance(setting, ScoreSetting)
        gallery = setting.gallery(rng, n) if tail else make_gallery(rng, n, k, p, setting)
        tables = fit_thresholds(gallery.training() if tail else training_impostors(gallery), estimators, TARGETS)
        query_seed = rng.integers(2 ** 63)  # the same evaluation queries for every estimator
        for label, values in tables.items():
            truth = true_fpr_scores(gallery, values) if tail else true_fpr(gallery, values)
            out[label]["true"][r] = truth / targets
            evaluate = evaluated_fpr_scores if tail else evaluated_fpr
            fpr, _ = evaluate(gallery, values, np.random.default_rng(query_seed))
            out[label]["eval"][r] = fpr / targets
    return out


def in_band(ratios: np.ndarray) -> np.ndarray:
    """Whether each ratio lies inside the goal band."""
    return (ratios >= BAND[0]) & (ratios <= BAND[1])


def summary_cells(ratios: np.ndarray) -> list[str]:
    """Per target 'median [p10-p90] share-in-band', then the share in band at every target at once."""
    cells = []
    for j in range(ratios.shape[1]):
        col = ratios[:, j]
        lo, med, hi = np.percentile(col, [10, 50, 90])
        cells.append(f"{med:.2f} [{lo:.2f}-{hi:.2f}] {100 * in_band(col).mean():.0f}%")
    cells.append(f"{100 * in_band(ratios).all(axis=1).mean():.0f}%")
    return cells


def markdown(results: list[tuple[Setting, int, int, str, dict[str, np.ndarray]]], k: int, p: int,
             seed: int, elapsed: float, command: str) -> str:
    """The report: one table for the true ratio and one for the evaluated ratio."""
    head = "| setting | N | R | estimator | " + " | ".join(f"{100 * t:g}%" for t in TARGETS) + " | all 4 in band |"
    rule = "|" + "---|" * (5 + len(TARGETS))
    lines = ["# Noise floor of the achieved/target FPR ratio on small galleries", "",
             f"`{command}` (seed {seed}, k = {k} positions, p = {p}, staggered enrollment; {elapsed:.0f} s).",
             (f"Cells: median ratio [10th-90th percentile] share of replicates with the ratio in "
              f"[{BAND[0]}, {BAND[1]}]. Generator and protocol: see the docstring of benchmarks/noise_floor.py."), ""]
    for kind, title in (("true", "True ratio (expected FPR of the fitted thresholds): training-side chance"),
                        ("eval", "Evaluated ratio (one query set per subject and position): training + test chance")):
        lines += [f"## {title}", "", head, rule]
        for setting, n, reps, label, ratios in results:
            lines.append(f"| {setting.name} | {n} | {reps} | {label} | " + " | ".join(summary_cells(ratios[kind])) + " |")
        lines.append("")
    attempts = sorted({(n, n * (n - 1) * (k - 1)) for _, n, _, _, _ in results})
    lines.append("Evaluation impostor attempts per replicate: "
                 + ", ".join(f"N = {n}: {a} (expected false accepts at {100 * TARGETS[-1]:g}%: {a * TARGETS[-1]:.1f})"
                             for n, a in attempts) + ".")
    return "\n".join(lines + ["", tail_generator_docs()]) + "\n"


def tail_generator_docs() -> str:
    """The Markdown section that defines every tail generator, one paragraph each (docs/noise-floor.md)."""
    lines = ["## Tail generators (`--tails`; benchmarks/world_fit.py, benchmarks/prediction_coverage.py)", "",
             "No geometry: class c's impostor distances are i.i.d. `d = exp(m_c + s_c X)` with `m_c ~ N(-0.8, 0.1^2)`, "
             "`s_c ~ U(0.1, 0.2)` (N - 1 per class here; world_fit.py and prediction_coverage.py choose the count), "
             "and the true FPR of thresholds t_c is exactly the mean over classes of `F_c(t_c)`, every class CDF in "
             "closed form (`ScoreGallery.class_cdf`). The standard shape X is N(0, 1) except as stated.", ""]
    for setting in TAIL_SETTINGS:
        lines += [f"**{setting.name}**: {setting.about}.", ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> str:
    """Run the benchmark; print the Markdown report, write it to results/noise_floor.md and return it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (seconds): few replicates, small sizes")
    parser.add_argument("--seed", type=int, default=2014, help="base seed of every replicate")
    parser.add_argument("--positions", type=int, default=7, help="set positions (conditions) per subject, k")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "noise_floor.md", help="where to write the report")
    parser.add_argument("--tails", nargs="*", default=None, choices=[s.name for s in TAIL_SETTINGS],
                        help="also run these tail generators (N - 1 distances per class; no names: all of them)")
    args = parser.parse_args(argv)
    p = 20
    if args.quick:
        plan, settings = [(30, 3), (38, 3), (100, 2)], SETTINGS[1:2]
    else:
        plan, settings = [(30, 40), (38, 40), (100, 20), (300, 8)], SETTINGS
    if args.tails is not None:
        settings = tuple(settings) + tuple(s for s in TAIL_SETTINGS if not args.tails or s.name in args.tails)
    registry = build_registry()
    estimators = {label: registry.get("estimators", label).factory() for label in ESTIMATORS}
    start = time.perf_counter()
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for si, setting in enumerate(SETTINGS + TAIL_SETTINGS):  # si: part of the seed
            if setting not in settings:
                continue
            for n, reps in plan:
                ratios = run_size(setting, n, args.positions, p, reps, estimators, args.seed, si)
                results += [(setting, n, reps, label, ratios[label]) for label in ESTIMATORS]
    elapsed = time.perf_counter() - start
    command = ("python benchmarks/noise_floor.py" + (" --quick" if args.quick else "") + f" --seed {args.seed}"
               + ("" if args.tails is None else " --tails" + "".join(f" {t}" for t in args.tails)))
    return publish(markdown(results, args.positions, p, args.seed, elapsed, command), args.out, elapsed)


def publish(report: str, out: Path, elapsed: float) -> str:
    """Print the report and the elapsed time, and write the report to ``out`` (shared with gpd_switch.py)."""
    print(report)
    print(f"elapsed: {elapsed:.1f} s")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report)
    return report


if __name__ == "__main__":
    main()
