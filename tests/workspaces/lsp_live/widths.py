"""The widths configured.py reads: constants only."""

HIDDEN = 16
