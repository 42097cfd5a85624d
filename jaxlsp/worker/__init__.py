"""Everything of ours that runs in the user's interpreter: the capture worker, the warm spare's fork
server, and (staged beside them) the graph model they write and the notebook reader.

Modules here import only the stdlib, jax (flax, equinox when the target needs them) and the
user's code, never the server's dependencies: ``jaxlsp.capture.launch.staging`` copies exactly the
packages named below into a private folder that the user's interpreter runs from.
"""

#: Folders under ``jaxlsp/`` staged into the user's interpreter: this package, ``jaxlsp.graph``
#: (shared with the server under that name, DESIGN §3) and ``jaxlsp.notebook`` (the worker reads
#: a notebook target's cells the way discovery did).
STAGED_PACKAGES = ("worker", "graph", "notebook")
