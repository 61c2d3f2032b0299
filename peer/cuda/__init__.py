"""Forwarding CUDA driver API calls: sessions, executor, backends (docs/cuda-forwarding.md)."""
