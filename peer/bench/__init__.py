"""Benchmarks behind ``gleam-peer bench``: programs that print a table and JSON."""
