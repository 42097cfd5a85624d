"""A values run: the traced program evaluated on real inputs, in the user's interpreter.

``materialise`` (in ``targets`` / ``inputs``: concrete mode) gives the inputs, ``interpret``
evaluates the graph's walk equation by equation, ``stats`` summarises every value on its device,
and ``run`` adds what the graph file records about the run (``execution``: replay validation,
the first non-finite value, executed regions, gradient norms) and the payloads (``.npz``, inline
arrays). Stdlib, numpy and jax only, as everything in the worker.
"""
