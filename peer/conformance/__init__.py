"""``gleam-peer conformance``: programs nobody here wrote, run through gleam.

NVIDIA's cuda-samples (from a checkout the user names) and numba-cuda's own
test suite run unchanged through two agents on loopback, a client without a
device and a host-backend server; the result is a table and JSON with every
failure's cause (docs/conformance.md).
"""
