"""Saved calibrations: fitting from arrays (fitting: calibrate.fit) and answering at run time
(calibration: Calibration), the JSON format they are saved in (json_format: writing it; reading: reading
it back and checking it), partitioned calibrations of sharded runs (partitioned), and judging one on a
new score file (assess).

May import: every package below it in calibrate.LAYERS (the leaf modules, files, contract,
statistics, predicted, normalisation, recipe).
"""
