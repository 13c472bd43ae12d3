"""Layer 1, the kernel: units and dimensions, symbols, errors, spec fields, terms, laws, the
scenario, options, terminal text. Imports nothing else of stepwall."""
