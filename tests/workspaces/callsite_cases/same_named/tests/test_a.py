import jax.numpy as jnp
from absl.testing import absltest

from proj.models.a import modeling


def make():
    return jnp.ones((3,)) * jnp.arange(3.0)


class ATest(absltest.TestCase):
    def test_forward(self):
        modeling.forward(make())


if __name__ == "__main__":
    absltest.main()
