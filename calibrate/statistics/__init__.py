"""Statistics shared by the estimators, the prediction and the evaluation: order statistics and
binomial intervals, generalised Pareto tails, working scales and standardised scores, verification
figures (FMR, FNMR, DET, one pooled threshold), score-direction checks.

May import: the leaf modules, calibrate.files, calibrate.contract.
"""
