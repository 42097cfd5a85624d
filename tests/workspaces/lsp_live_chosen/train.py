"""Trains: writes a checkpoint into the project before its first step."""

import argparse
import os
import pathlib

import jax.numpy as jnp

from model import layer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, required=True)
    parser.parse_args()
    folder = pathlib.Path(__file__).with_name("checkpoints")
    folder.mkdir(exist_ok=True)
    (folder / f"ckpt-{os.getpid()}").write_text("step 0\n")
    layer(jnp.ones((2, 8)))


if __name__ == "__main__":
    main()
