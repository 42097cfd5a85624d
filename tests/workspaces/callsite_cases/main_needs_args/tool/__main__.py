import argparse

import jax.numpy as jnp

from tool.ops import step


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("size", type=int)
    args = parser.parse_args()
    print(step(jnp.ones((args.size,)) * jnp.arange(args.size)))


if __name__ == "__main__":
    main()
