"""A program that traces but does not compile: its FFI target is registered nowhere."""

import jax


def foreign(x):
    y = jax.ffi.ffi_call("jaxlsp_no_such_target", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    return y * 2
