"""The serving agent's side of a forwarded session: backends, executor sessions
and the native lane that runs their batches.

Imports the shared ``wire`` and never ``client``.
"""
