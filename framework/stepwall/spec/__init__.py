"""Layer 2, specs: reading TOML (references, ``from``, ``--set``) and validating it into a
Scenario; the quantity, range and span grammar. Imports core."""
