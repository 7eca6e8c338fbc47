"""Running a recipe: the stages in order (pipeline), the sharded route through the same stages,
group-by-group calibration, work run beside the pipeline, what a run returns and its output files.

May import: every package below it in calibrate.LAYERS (up to calibrate.saved).
"""
