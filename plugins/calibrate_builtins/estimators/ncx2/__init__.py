"""The paper's method: per class, a non-central chi-square fitted by grid search over dim and sigma.

grid.py: the ``ncx2-grid`` estimator and its model (Algorithm 1 and its fast mode); search.py: its
grid search (parameter checks, sigma grids, Algorithm 1 for one class, a chunk of classes per task);
batch.py: the batched, vectorised grid evaluation behind it (the exact cascade and the fast search);
batch_scores.py: the numerics those score grid points with (a chunk of classes, compressed; Sankaran's
and the interpolated CDF); tail.py: ``ncx2-tail`` and ``ncx2-cv``, which fit the lower tail or choose
the grid by cross-validation.
"""
