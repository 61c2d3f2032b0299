"""The client agent's side of a forwarded session: an interposer's session from
its HELLO on, choosing a server, opening, the journal, checkpoints and moves.

Imports the shared ``wire`` and never ``server``: what it needs of the serving
side (this agent serving its own program) comes through ``route``'s Protocols.
"""
