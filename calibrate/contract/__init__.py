"""The plugin contract: what a plugin implements (base classes, hook specifications, parameters),
the data it receives and returns (types, sharded data, progress tasks, saved-state checks), and how
components are found by name (kinds, registry, plugin manager).

May import: calibrate.errors, calibrate.formatting, calibrate.version, calibrate.files.
"""
