"""A tiny language model in Flax Linen, NNX and Equinox (tests/worker/examples/test_signatures.py)."""
