"""Distance ``mutual-subspace``: canonical correlations between image sets (the paper's baseline).

Each set is represented by the orthonormal basis ``P_i`` (D x k) of its first ``components``
principal directions, and the distance between two sets is

    delta = 1 - max_{u, v} (P_i u)^T (P_j v) = 1 - sigma_max(P_i^T P_j)

i.e. one minus the cosine of the smallest principal angle between the two subspaces (Bjorck and
Golub 1973; Fukui and Yamaguchi's mutual subspace method). Values lie in [0, 1]: 0 for sets whose
subspaces share a direction (in particular d(A, A) = 0), 1 for orthogonal subspaces.

Basis. Optionally every sample is scaled to unit L2 norm (``normalize``), then the set mean is
subtracted (``center``), then the right singular vectors of the (samples x D) matrix give the
principal directions (a thin SVD; no D x D covariance is formed).

Few samples. A set has at most ``n - 1`` independent directions after centring (``n`` without),
and possibly fewer if its samples are linearly dependent; numerical rank uses numpy's
``matrix_rank`` tolerance, relative to the size of the data before centring. Such a set is represented by the directions it has,
``min(rank, components)``: the distance is still 1 - the largest canonical correlation. When
centring leaves nothing at all (a single sample, or all samples identical) the set falls back to
its *uncentred* direction (the span of its samples). Both cases are reported once per call with
``context.note``. A set whose samples are all zero vectors has no direction and is an error.

Speed. Bases are stacked into one (sets*k x D) matrix; the k x k blocks ``P_i^T P_j`` for all
pairs come from one matrix product per block of pairs, and their largest singular values from
a batched ``eigvalsh`` of the k x k Gram matrices ``M^T M`` (sigma_max = sqrt(lambda_max)),
with the SVD kept for nearly orthogonal pairs, where the square root would lose digits. Probe
sets that are also gallery sets (the pipeline compares all sets with the enrolled ones) are
served from the gallery x gallery matrix, which is symmetric and computed by halves. Blocks are
sized to stay within about 64 MB whatever the number of sets (the output matrix aside), and
each row of blocks is one task for the run's executor.
"""

from __future__ import annotations

import numpy as np

from calibrate.contract.base import Distance, RunContext
from calibrate.errors import DataError, ParameterError
from calibrate.contract.progress import NULL_TASK
from calibrate.contract.types import SetCollection

#: memory budget for the k x k blocks of one batch (the product, its transpose and SVD workspace)
_BLOCK_BYTES = 64 * 2**20


def _numerical_rank(s: np.ndarray, shape: tuple[int, int], scale: float) -> int:
    """numpy's matrix_rank rule, relative to ``scale`` (the size of the data before centring, so
    that the rounding left by centring identical samples does not count as a direction)."""
    if s.size == 0:
        return 0
    return int(np.count_nonzero(s > max(s[0], scale) * max(shape) * np.finfo(np.float64).eps))


def _right_singular(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Singular values and right singular vectors (as rows) of Y by a thin SVD.

    For the usual wide matrices (fewer samples than features) LAPACK is much faster on the
    transpose, whose left singular vectors are Y's right singular vectors.
    """
    if Y.shape[0] < Y.shape[1]:
        u, s, _ = np.linalg.svd(Y.T, full_matrices=False)
        return s, u.T
    _, s, vt = np.linalg.svd(Y, full_matrices=False)
    return s, vt


def subspace_basis(X: np.ndarray, components: int, center: bool = True,
                   normalize: bool = True) -> tuple[np.ndarray, int, bool]:
    """Orthonormal principal directions of one set as rows, shape (r, D) with r <= components.

    Returns (basis, r, fell_back) where ``fell_back`` says that centring left no direction and
    the uncentred one was used. Raises DataError when the set has no direction at all.
    """
    X = np.asarray(X, dtype=np.float64)
    if normalize:
        norms = np.linalg.norm(X, axis=1, keepdims=True)
        X = np.divide(X, norms, out=np.zeros_like(X), where=norms > 0)
    scale = float(np.linalg.norm(X))
    Y = X - X.mean(axis=0) if center else X
    s, vt = _right_singular(Y)
    rank = _numerical_rank(s, Y.shape, scale)
    fell_back = False
    if rank == 0 and center:
        s, vt = _right_singular(X)
        rank = _numerical_rank(s, X.shape, scale)
        fell_back = True
    if rank == 0:
        raise DataError("all samples are zero vectors, so the set spans no direction")
    r = min(rank, components)
    return vt[:r], r, fell_back


def _block_cosines(blocks: np.ndarray) -> np.ndarray:
    """Largest singular value of each k x k block (..., k, k).

    sigma_max(M) = sqrt(lambda_max(M^T M)): a batched ``eigvalsh`` of the Gram matrices is about
    twice as fast as a batched SVD of the blocks. When the largest eigenvalue is tiny (nearly
    orthogonal subspaces) its square root loses digits, so those blocks go through the SVD.
    """
    gram = np.einsum("...ca,...cb->...ab", blocks, blocks)
    lam = np.linalg.eigvalsh(gram)[..., -1]
    out = np.sqrt(np.maximum(lam, 0.0))
    small = lam < 1e-4
    if np.any(small):
        out[small] = np.linalg.svd(blocks[small], compute_uv=False)[..., 0]
    return out


def largest_cosines(bp: np.ndarray, bg: np.ndarray | None, context: RunContext | None = None,
                    block_bytes: int | None = None) -> np.ndarray:
    """cos of the smallest principal angle between every probe basis and every gallery basis.

    :param bp: (p, k, D) orthonormal bases as rows (zero rows allowed).
    :param bg: (g, k, D), or None for ``bp`` against itself (symmetric: only blocks on or above
        the diagonal are computed and mirrored).
    :param context: work goes through ``context.map`` (an executor), one task per row block.
    :param block_bytes: memory budget of one block of k x k blocks (the product, the Gram
        matrices and eigvalsh workspace, about 3x the product; default 64 MB); blocks are square when possible.
    """
    symmetric = bg is None
    bg = bp if symmetric else bg
    block_bytes = _BLOCK_BYTES if block_bytes is None else block_bytes
    p, k, D = bp.shape
    g = bg.shape[0]
    pairs = max(1, block_bytes // (3 * k * k * 8))
    side = max(1, int(np.sqrt(pairs)))
    rb = min(p, side)
    cb = min(g, max(side, pairs // max(rb, 1)))
    out = np.empty((p, g))
    tasks = []
    for i0 in range(0, p, rb):
        i1 = min(p, i0 + rb)
        starts = range(i0 - i0 % cb if symmetric else 0, g, cb)
        tasks.append((i0, i1, [(j0, min(g, j0 + cb)) for j0 in starts if not symmetric or min(g, j0 + cb) > i0]))
    flat_p, flat_g = bp.reshape(p * k, D), bg.reshape(g * k, D)
    work = [(flat_p[i0 * k:i1 * k], flat_g, cols, k) for i0, i1, cols in tasks]
    context = context or RunContext()
    pairs = [(i1 - i0) * sum(j1 - j0 for j0, j1 in cols) for i0, i1, cols in tasks]
    what = f"{p} x {p} (symmetric, by halves)" if symmetric else f"{p} x {g}"
    results = context.map(_row_block, work, description=f"mutual-subspace: subspace angles, {what} sets",
                          sizes=pairs, unit="pairs")
    for (i0, i1, cols), parts in zip(tasks, results):
        for (j0, j1), vals in zip(cols, parts):
            out[i0:i1, j0:j1] = vals
            if symmetric:
                out[j0:j1, i0:i1] = vals.T
    return out


def _row_block(task: tuple) -> list[np.ndarray]:
    """Cosines of one block of probe bases against column blocks of gallery bases (picklable)."""
    rows, flat_g, cols, k = task
    # a private copy: numpy computes ``A @ A.T`` on one buffer with syrk, whose rounding differs from
    # gemm's; a task that travelled to another process never shares a buffer, so neither may this one
    rows = np.array(rows, copy=True)
    r = rows.shape[0] // k
    res = []
    for j0, j1 in cols:
        blocks = rows @ flat_g[j0 * k:j1 * k].T
        blocks = blocks.reshape(r, k, j1 - j0, k).transpose(0, 2, 1, 3)
        res.append(_block_cosines(blocks))
    return res


class MutualSubspace(Distance):
    """1 - the largest canonical correlation between the sets' principal subspaces.

    :param components: principal directions per set (the paper's d_p = 6).
    :param center: subtract each set's mean before PCA.
    :param normalize: scale every sample to unit L2 norm before PCA.
    """

    def __init__(self, *, components: int = 6, center: bool = True, normalize: bool = True):
        if isinstance(components, bool) or not isinstance(components, (int, np.integer)) or components < 1:
            raise ParameterError(f"components must be a positive integer (principal directions per set), got {components!r}")
        self.components, self.center, self.normalize = int(components), center, normalize

    def _bases(self, sets: SetCollection, cache: dict, stats: dict, context: RunContext | None = None) -> np.ndarray:
        """(n_sets, k, D) bases, rows zero-padded for sets with fewer than k directions."""
        k = self.components
        dims = {np.shape(s)[1] if np.ndim(s) == 2 else None for s in sets.samples}
        if None in dims:
            bad = next(i for i, s in enumerate(sets.samples) if np.ndim(s) != 2)
            raise DataError(f"mutual-subspace: set {sets.ids[bad]} is not a 2-D array (samples x features)")
        if len(dims) != 1:
            raise DataError(f"mutual-subspace: sets have different feature dimensions {sorted(dims)}; "
                            "all samples must have the same length (for images: give the dataset `resize:`)")
        D = dims.pop()
        out = np.zeros((len(sets), k, D))
        context = context or RunContext()
        todo = len({id(s) for s in sets.samples} - set(cache))
        if not todo:  # every basis is cached already
            self._fill_bases(sets, cache, stats, out, NULL_TASK)
            return out
        with context.stage(f"mutual-subspace: principal subspaces of {todo} sets", todo, "sets") as task:
            self._fill_bases(sets, cache, stats, out, task)
        return out

    def _fill_bases(self, sets: SetCollection, cache: dict, stats: dict, out: np.ndarray, task) -> None:
        k = self.components
        for i, samples in enumerate(sets.samples):
            key = id(samples)
            if key not in cache:
                if np.shape(samples)[0] == 0:
                    raise DataError(f"mutual-subspace: set {sets.ids[i]} has no samples")
                if not np.all(np.isfinite(samples)):
                    raise DataError(f"mutual-subspace: set {sets.ids[i]} contains NaN or infinite values")
                try:
                    basis, r, fell_back = subspace_basis(samples, k, self.center, self.normalize)
                except DataError as exc:
                    raise DataError(f"mutual-subspace: set {sets.ids[i]}: {exc}") from None
                cache[key] = (samples, basis)  # keep `samples` alive so its id is not reused
                if r < k:
                    stats["short"].append((str(sets.ids[i]), r, np.shape(samples)[0]))
                if fell_back:
                    stats["fallback"].append(str(sets.ids[i]))
                task.advance(1)
            basis = cache[key][1]
            out[i, :basis.shape[0]] = basis

    def _pairwise(self, probes: SetCollection, gallery: SetCollection, context: RunContext) -> np.ndarray:
        cache: dict = {}
        stats: dict = {"short": [], "fallback": []}
        bp = self._bases(probes, cache, stats, context)
        bg = self._bases(gallery, cache, stats, context)
        if bp.shape[2] != bg.shape[2]:
            raise DataError(f"mutual-subspace: probe sets have {bp.shape[2]} features, gallery sets {bg.shape[2]}")
        self._report(stats, len(cache), context)
        # probes that are gallery sets (the same sample arrays) take their row from the gallery x
        # gallery matrix, which is symmetric and computed by halves
        where = {id(s): j for j, s in enumerate(gallery.samples)}
        same = np.array([where.get(id(s), -1) for s in probes.samples], dtype=np.int64)
        out = np.empty((bp.shape[0], bg.shape[0]))
        if np.any(same >= 0):
            sym = largest_cosines(bg, None, context)
            out[same >= 0] = sym[same[same >= 0]]
            del sym
        rest = np.flatnonzero(same < 0)
        if rest.size:
            out[rest] = largest_cosines(bp[rest], bg, context)
        return 1.0 - np.clip(out, 0.0, 1.0)

    def _report(self, stats: dict, n_sets: int, context: RunContext) -> None:
        short, fallback = stats["short"], stats["fallback"]
        if not short:
            return
        k = self.components
        what = "after centring" if self.center else "of their samples"
        smallest = min(short, key=lambda t: t[1])
        # set ids hold folder names, which may hold a line break: escape it, a note is one line
        fallback = [s if s.isprintable() else repr(s)[1:-1] for s in fallback]
        smallest = (smallest[0] if smallest[0].isprintable() else repr(smallest[0])[1:-1], *smallest[1:])
        msg = (f"mutual-subspace: {len(short)} of {n_sets} sets have fewer than components={k} independent "
               f"directions {what}; they use the directions they have (smallest: {smallest[1]} for set "
               f"{smallest[0]} with {smallest[2]} sample(s))")
        if fallback:
            msg += (f"; {len(fallback)} set(s) had no direction left after centring (a single sample or identical "
                    f"samples) and use their uncentred direction instead: {', '.join(fallback[:5])}"
                    f"{' ...' if len(fallback) > 5 else ''}")
        context.note(msg)
