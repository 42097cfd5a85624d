"""The compiled program: XLA's compiled module and HLO read back to nodes, per-equation costs,
measured time and the profiler's device time. Imports ``core``, ``tracing`` and
``jaxlsp.graph``."""
