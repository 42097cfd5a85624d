import numpy as np

from tinyops.ops import scale


def make(rows):
    return np.ones((rows, 2), dtype=np.float32)


def test_scale():
    assert scale(make(3)).shape == (3, 2)
