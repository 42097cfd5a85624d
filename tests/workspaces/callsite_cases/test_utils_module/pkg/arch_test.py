import jax
import jax.numpy as jnp
from absl.testing import absltest

from pkg import arch_test_utils as tu


class DecTest(absltest.TestCase):
    def test_shapes(self):
        dec = tu.make_dec()
        out, _ = dec.init_with_output(jax.random.key(0), jnp.ones((2, 4)))
        self.assertEqual(out.shape, (2, 3))


if __name__ == "__main__":
    absltest.main()
