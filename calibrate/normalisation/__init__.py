"""Score normalisation (recipe key ``normalizer:``): cohort statistics per attempt (row_statistics), the
fitted normalisation a calibration saves with the record of its cohort (fitted), probes' and matrices'
cohorts (cohort: the public module, which re-exports the other two), the run's normaliser stage (stage),
and what a normalised calibration adds to accept and enroll (decisions).

May import: the leaf modules, calibrate.files, calibrate.contract, calibrate.statistics.
"""
