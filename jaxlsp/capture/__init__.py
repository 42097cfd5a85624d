"""Capture: the client (server side) and the worker (user's interpreter, stdlib + jax only)."""
