"""What both sides of a forwarded session share: envelopes, control messages,
the data connection, call ids and native blocks.

Imports nothing of ``client`` or ``server`` (tests/test_package_layering.py), so
the blob cache and both sides can use it.
"""
