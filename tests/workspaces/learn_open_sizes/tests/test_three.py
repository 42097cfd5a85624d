from pkg.layers import dense


def test_batch_three(three, w):
    assert dense(three, w).shape == (3, 4)
