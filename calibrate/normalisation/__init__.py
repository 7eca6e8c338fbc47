"""Score normalisation (recipe key ``normalizer:``): cohort statistics per attempt, the fitted
normalisation a calibration saves, the run's normaliser stage, and what a normalised calibration
adds to accept and enroll.

May import: the leaf modules, calibrate.files, calibrate.contract, calibrate.statistics.
"""
