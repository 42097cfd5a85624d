"""Running the workspace's own examples: a test, script, module or notebook run to the target's
first call, and the call it saw written back as a profile. Imports every room below it
(``core``, ``tracing``, ``reuse``, ``loading``, ``program``)."""
