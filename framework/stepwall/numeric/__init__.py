"""Layer 4, numbers: sympy expressions printed to numpy or plain-Python source, compiled once
and cached on disk, evaluated vectorized; worker pools. Imports the layers below."""
