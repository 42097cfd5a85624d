from unittest import TestCase

import jax.numpy as jnp

from pkg.bij import B


class BTest(TestCase):
    def test_props(self):
        self.assertIsNotNone(B())

    def test_forward(self):
        self.assertEqual(B().forward(jnp.ones(3)).shape, (3,))
