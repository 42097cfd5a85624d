from pkg import arch


def make_dec():
    return arch.Dec(features=3)
