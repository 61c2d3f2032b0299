"""Built-in plugin: lossless homomorphic compression of sparse gradients."""
