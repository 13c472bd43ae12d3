"""Layer 5, the model: a scenario's terms composed into step time, the metrics, constraints and
economics. Imports the layers below."""
