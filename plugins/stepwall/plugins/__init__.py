"""Built-in plugins. Each is an ordinary pluggy plugin registered by module name."""
