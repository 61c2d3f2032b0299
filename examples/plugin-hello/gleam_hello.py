"""A third-party gleam plugin, packaged on its own (see pyproject.toml).

Try it: ``pip install ./examples/plugin-hello``, restart the agent, then
``gleam-peer plugins`` lists it and the control operation ``hello`` answers.
"""

import pluggy

hookimpl = pluggy.HookimplMarker("gleam")


@hookimpl
def gleam_capabilities():
    return ["hello"]


@hookimpl
def gleam_control_request(agent, op, args):
    if op != "hello":
        return None
    return {"greeting": f"hello {args.get('who', 'world')} from {agent.config.name}"}


@hookimpl
def gleam_status(agent):
    return {"hello": {"peers_seen": len(agent.links)}}
