"""An ODE term: its vector field is a Python function, which no recipe can spell."""


class ODETerm:
    def __init__(self, vector_field):
        self.vector_field = vector_field

    def vf(self, t, y):
        return self.vector_field(t, y)
