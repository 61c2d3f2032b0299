"""Built-in plugin: reinforcement-learned batch-size tuning."""
