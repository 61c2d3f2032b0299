"""Built-in plugin: the host backend's kernels (being written)."""
