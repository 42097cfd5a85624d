"""Tracing and building the graph: JAX's configuration, the jaxpr walked into the canonical graph,
named scopes, graph-size limits, shape contracts. ``jaxcompat`` is the one place that touches
``jax._src``. Imports ``core`` and ``jaxlsp.graph``."""
