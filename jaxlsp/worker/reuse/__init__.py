"""Reuse across captures: Linen structure hints, replayed module calls, NNX / Equinox init
snapshots, and JAX's caches primed in the warm spare. Imports ``core`` and ``tracing``."""
