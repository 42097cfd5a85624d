from .helpers import act


def forward(x):
    return act(x) + 1.0
