"""A package whose modules only their own tests import (issue 56: learn for one file)."""
