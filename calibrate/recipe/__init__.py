"""The YAML recipe: reading the file strictly, the typed and fully validated Recipe, the paper's
enrollment protocol for pattern datasets, and demographic groups files.

May import: the leaf modules, calibrate.files, calibrate.contract, calibrate.statistics,
calibrate.predicted, calibrate.normalisation.
"""
