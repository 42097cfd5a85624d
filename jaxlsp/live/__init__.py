"""Live shapes: re-tracing the targets a saved file touches, in the background (no pygls here)."""
