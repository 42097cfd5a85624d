"""Tests written as flax's own examples write them: an absl TestCase, parameterized."""

import data_utils
from absl.testing import absltest, parameterized

from zoo.functions import softsign


class SoftsignTest(parameterized.TestCase):
    @parameterized.product(rows=(2, 3))  # absl names the methods test_softsign0, test_softsign1
    def test_softsign(self, rows):
        x = data_utils.make_batch(rows, 4)
        self.assertEqual(softsign(x).shape, (rows, 4))


if __name__ == "__main__":
    absltest.main()
