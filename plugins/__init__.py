"""Built-in gleam plugins."""
