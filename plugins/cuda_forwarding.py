"""Built-in plugin: CUDA forwarding (being written)."""
