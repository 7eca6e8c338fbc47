"""The YAML recipe: reading the file strictly (reading), the typed Recipe (schema) and its validation in
full, section by section (validation), the paper's enrollment protocol for pattern datasets (protocol), and
demographic groups files (groups).

May import: the leaf modules, calibrate.files, calibrate.contract, calibrate.statistics,
calibrate.predicted, calibrate.normalisation.
"""
