from jaxtyping import install_import_hook

# as GPJax's tests/conftest.py: the package imported under the hook, before any test file
with install_import_hook("pkg", "beartype.beartype"):
    import pkg  # noqa: F401
