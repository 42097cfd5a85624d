import unittest

import jax
import jax.numpy as jnp

from pkg.mod import M


class MTest(unittest.TestCase):
    def test_raises(self):
        with self.assertRaises(ValueError):
            M().init(jax.random.key(0), jnp.ones((2, 4)), strict=True)

    def test_ok(self):
        M().init(jax.random.key(0), jnp.ones((2, 4)))
