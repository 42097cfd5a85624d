from pkg.layers import dense


def test_dense(x, w):
    assert dense(x, w).shape == (3, 5)
