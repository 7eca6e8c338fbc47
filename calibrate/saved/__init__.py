"""Saved calibrations: fitting from arrays and answering at run time (Calibration), the JSON format
they are saved in, partitioned calibrations of sharded runs, and judging one on a new score file.

May import: every package above it in calibrate.LAYERS (the leaf modules, files, contract,
statistics, predicted, normalisation, recipe).
"""
