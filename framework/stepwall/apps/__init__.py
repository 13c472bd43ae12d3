"""Layer 8, applications: search, sweep, calibrate, validate, explore, reports, the reference.
Each imports the layers below, never the command line."""
