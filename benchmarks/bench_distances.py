"""Mutual-subspace distances at scale, timed against the one matrix product every method needs.

    .venv/bin/python benchmarks/bench_distances.py [--sets 5000] [--dim 1024] [--components 6]

Generates ``sets`` seeded image sets (``samples`` samples of ``dim`` features each: a random
6-dimensional structure per set plus noise), computes their orthonormal bases, and in one run:

* times the **product** ``B @ B.T`` of the stacked bases (``sets*components x dim``) against
  themselves, computed tile by tile with the same tile size and discarded (materialising it
  whole would take sets^2 k^2 8 bytes: 7.2 GB for 5,000 sets); any method must form these k x k
  blocks, so this is the floor;
* times the project's distances from the same bases (``largest_cosines``: symmetric halves,
  batched eigvalsh of the 6 x 6 Gram matrices), interleaved with the product (two rounds each);
* measures the peak memory the distance computation allocates beyond its inputs and output
  (tracemalloc, which sees numpy's buffers), and the process's peak RSS;
* checks the distances against the previous implementation (batched SVD of every block, kept
  here as the reference) on the first ``check_rows`` rows: max |difference| <= 1e-10.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time
import tracemalloc

import numpy as np

from calibrate.contract.base import RunContext
from calibrate.contract.types import SetCollection
from calibrate_builtins.distances.mutual_subspace import MutualSubspace, largest_cosines


def make_sets(n_sets: int, samples: int, dim: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_sets):
        basis = rng.standard_normal((6, dim))
        coef = rng.standard_normal((samples, 6)) * np.array([3.0, 2.5, 2.0, 1.5, 1.0, 0.8])
        out.append(coef @ basis + 0.3 * rng.standard_normal((samples, dim)) + rng.standard_normal(dim))
    return out


def product_tiles(B: np.ndarray, tile: int) -> float:
    """Seconds to form every tile of B @ B.T (tile x tile rows of B), discarding them."""
    t0 = time.perf_counter()
    for i0 in range(0, B.shape[0], tile):
        rows = B[i0:i0 + tile]
        for j0 in range(0, B.shape[0], tile):
            rows @ B[j0:j0 + tile].T
    return time.perf_counter() - t0


def svd_reference(bp: np.ndarray, bg: np.ndarray) -> np.ndarray:
    """The previous implementation: batched SVD of every k x k block."""
    p, k, D = bp.shape
    g = bg.shape[0]
    out = np.empty((p, g))
    step = 100
    for i0 in range(0, p, step):
        i1 = min(p, i0 + step)
        blocks = bp[i0:i1].reshape(-1, D) @ bg.reshape(-1, D).T
        blocks = blocks.reshape(i1 - i0, k, g, k).transpose(0, 2, 1, 3)
        out[i0:i1] = np.linalg.svd(blocks, compute_uv=False)[..., 0]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", type=int, default=5000)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--components", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--check-rows", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    k = args.components
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; load {os.getloadavg()}")
    t0 = time.perf_counter()
    sets = make_sets(args.sets, args.samples, args.dim, args.seed)
    print(f"generated {args.sets} sets of {args.samples} x {args.dim} in {time.perf_counter() - t0:.1f} s")
    coll = SetCollection(tuple(sets), np.array([f"c{i}" for i in range(len(sets))]),
                         np.array([f"s{i}" for i in range(len(sets))]))
    dist = MutualSubspace(components=k)
    t0 = time.perf_counter()
    bases = dist._bases(coll, {}, {"short": [], "fallback": []})
    t_bases = time.perf_counter() - t0
    B = bases.reshape(-1, args.dim)
    print(f"bases: {bases.shape} in {t_bases:.1f} s; stacked B is {B.shape[0]} x {B.shape[1]}")
    # the tile size the distance code uses (square blocks of 64 MB / (3 k^2 8) pairs)
    pairs = (64 * 2**20) // (3 * k * k * 8)
    tile = int(np.sqrt(pairs)) * k
    t_prod, t_ours = [], []
    for r in range(args.rounds):
        t_prod.append(product_tiles(B, tile))
        tracemalloc.start()
        t0 = time.perf_counter()
        cos = largest_cosines(bases, None, RunContext())
        t_ours.append(time.perf_counter() - t0)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"round {r + 1}: product B @ B.T {t_prod[-1]:.1f} s; distances {t_ours[-1]:.1f} s "
              f"(ratio {t_ours[-1] / t_prod[-1]:.2f}); load {os.getloadavg()[0]:.2f}")
    out_bytes = cos.nbytes
    print(f"peak memory allocated by the distance computation: {peak / 2**20:.0f} MB, of which the "
          f"{cos.shape[0]} x {cos.shape[1]} output is {out_bytes / 2**20:.0f} MB -> working memory "
          f"{(peak - out_bytes) / 2**20:.0f} MB (all 6x6 blocks at once would be {B.shape[0] ** 2 * 8 / 2**30:.1f} GB)")
    print(f"process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MB")
    rows = min(args.check_rows, args.sets)
    t0 = time.perf_counter()
    ref = svd_reference(bases[:rows], bases)
    t_ref = time.perf_counter() - t0
    diff = np.abs((1 - np.clip(ref, 0, 1)) - (1 - np.clip(cos[:rows], 0, 1))).max()
    print(f"check vs the previous implementation (batched SVD), first {rows} rows x {args.sets}: "
          f"max |distance difference| = {diff:.2e} ({'OK' if diff <= 1e-10 else 'FAIL'}); the SVD route took "
          f"{t_ref:.1f} s for those rows, i.e. about {t_ref * args.sets / rows:.0f} s for all")
    best_p, best_o = min(t_prod), min(t_ours)
    print(f"RESULT sets={args.sets} dim={args.dim} k={k}: product {best_p:.1f} s, distances {best_o:.1f} s, "
          f"ratio {best_o / best_p:.2f} (target <= 3), bases {t_bases:.1f} s")
    if diff > 1e-10:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
