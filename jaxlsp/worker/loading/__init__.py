"""Loading the target and its inputs: the target's file (or notebook) by path, input specs built
into values, and targets initialised abstractly and made traceable. Imports ``core``,
``tracing`` and ``reuse``."""
