"""Imported by tested.py: adds a line to IMPORTS each time a capture loads it."""

import pathlib

with open(pathlib.Path(__file__).with_name("IMPORTS"), "a") as log:
    log.write("tested\n")
