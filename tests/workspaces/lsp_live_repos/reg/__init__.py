"""equimo's tabular/layers layout: the package imports its blocks, whose decorators fill a registry."""

from reg import blocks  # noqa: F401
