"""The porting agent's nodes: each a small function ``(state, runtime) -> partial state``.

analyze -> retrieve -> draft -> check -> benchmark -> decide -> (draft | optimise | finish);
agent/graph.py wires them, agent/session.py runs them.
"""
