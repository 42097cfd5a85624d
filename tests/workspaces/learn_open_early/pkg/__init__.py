"""A module two test files import: one fast, one slow (issue 56: learn on open turns a target live
from the first test that teaches it, not after the slowest)."""
