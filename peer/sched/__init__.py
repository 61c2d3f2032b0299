"""The scheduler: which server finishes a session soonest (docs/scheduler.md).

``cost`` is the model (plain inputs, one formula), ``ranking`` turns it into an
explained choice, ``lease`` is the admission exchange between a client and a
server (sans-I/O), ``leasing`` runs it over peer links, ``reevaluate`` decides
whether a running session should move, and ``sim`` is the discrete-event
simulation behind ``gleam-peer bench scheduler``.
"""
