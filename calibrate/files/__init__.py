"""Reading and writing files, and nothing else: score lists, files named by other files (untrusted
input), files the user named, a run's output folder (its manifest, commit and owner key).

May import: calibrate.errors, calibrate.formatting, calibrate.version (stdlib, numpy). Nothing else of
calibrate, so any layer may use it.
"""
