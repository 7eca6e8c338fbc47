"""How far a threshold can be trusted before any evaluation data exist: the reference world fitted to
the training distances, the predicted FPR interval simulated in it, and thresholds with a stated
confidence.

May import: the leaf modules, calibrate.files, calibrate.contract, calibrate.statistics.
"""
