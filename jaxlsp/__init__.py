"""jaxlsp: a language server that shows what a JAX program really is."""

__version__ = "0.1.0"
