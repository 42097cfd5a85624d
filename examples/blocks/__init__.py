"""A small package: a base block re-exported here, subclassed in another file."""

from .base import ResidualBlock

__all__ = ["ResidualBlock"]
