"""A tiny language model in Flax Linen, NNX and Equinox (tests/capture/worker/examples/test_signatures.py)."""
