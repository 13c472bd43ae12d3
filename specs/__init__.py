"""The shipped catalog: models/, hardware/, clusters/, scenarios/, reports/ (TOML)."""
