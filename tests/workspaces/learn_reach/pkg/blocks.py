from pkg.layers import dense


def block(x, w):
    return dense(x, w) + x
