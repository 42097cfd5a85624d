from absl.testing import absltest

from pkg import arch


class OtherTest(absltest.TestCase):
    def test_helper(self):
        self.assertEqual(arch.helper(1), 1)


if __name__ == "__main__":
    absltest.main()
