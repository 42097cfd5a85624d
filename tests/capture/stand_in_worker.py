"""A stand-in capture worker (stdlib only): misbehaves on demand, chosen by ``target.name``.

Staged next to the real worker's packages as the top-level module ``stand_in_worker``; it has the
real worker's entry points: ``main()`` (request on stdin, result on ``request["resultFd"]``) and
``capture(request, *, jax_ready=False)`` (the in-process path a warm spare's fork runs).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

_NO_RESULT = object()


def capture(request: dict[str, Any], *, jax_ready: bool = False) -> Any:
    jax_preloaded = "jax" in sys.modules
    behaviour = request["target"]["name"]
    fd = request["resultFd"]
    extra: dict[str, Any] = {}
    if behaviour == "print":
        print("hello from stdout")
        print("hello from stderr", file=sys.stderr)
    elif behaviour == "flood":
        chunk = b"x" * 1023 + b"\n"
        block = chunk * 1024  # 1 MiB
        for _ in range(100):
            os.write(1, block)
        os.write(2, b"stderr survives the flood\n")
        os.write(1, b"THE END\n")
    elif behaviour == "sleep":
        print(f"sleeping in group {os.getpgid(0)}", flush=True)
        if os.fork() == 0:  # a child that outlives nothing: the group kill must take it too
            time.sleep(1000)
            os._exit(0)
        time.sleep(1000)
    elif behaviour == "exit3":
        sys.stderr.write("about to exit with 3\n")
        sys.stderr.flush()
        os._exit(3)
    elif behaviour == "segv":
        import ctypes

        ctypes.string_at(0)
    elif behaviour == "alloc":
        hoard = []
        while True:
            hoard.append(bytearray(16 * 1024 * 1024))
    elif behaviour == "fork":
        pids = []
        for _ in range(request.get("children", 50)):
            pid = os.fork()
            if pid == 0:
                time.sleep(1000)
                os._exit(0)
            pids.append(pid)
        extra["children"] = pids
    elif behaviour == "closefd":
        os.close(fd)
        return _NO_RESULT
    elif behaviour == "garbage":
        os.write(fd, b'{"ok": tru')
        os.close(fd)
        return _NO_RESULT
    elif behaviour == "isolation":
        found = {}
        for name in ("pygls", "lsprotocol", "libcst", "jaxlsp.discovery", "jaxlsp.server"):
            try:
                __import__(name)
                found[name] = True
            except ImportError:
                found[name] = False
        import jaxlsp
        import jaxlsp.graph.model
        import jaxlsp.worker.protocol

        extra.update(
            imports=found,
            jaxlsp=jaxlsp.__file__,
            graph=jaxlsp.graph.model.__file__,
            path=sys.path,
            isolated=sys.flags.isolated,
            bytecode=sys.dont_write_bytecode,
            cwd=os.getcwd(),
        )
    elif behaviour == "jax":
        t0 = time.perf_counter()
        import jax
        import jax.numpy as jnp

        closed = jax.make_jaxpr(lambda x: jnp.sin(x) * 2)(jax.ShapeDtypeStruct((3,), jnp.float32))
        extra.update(equations=len(closed.jaxpr.eqns), seconds=time.perf_counter() - t0)
    elif behaviour == "user":
        import importlib.util

        path = request["target"]["path"]
        extra["alreadyImported"] = "usermod" in sys.modules
        spec = importlib.util.spec_from_file_location("usermod", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["usermod"] = module
        spec.loader.exec_module(module)
        extra["value"] = module.VALUE
    elif behaviour == "linger":
        # A complete result, then a worker that never exits (a stuck atexit hook, a thread...).
        data = json.dumps({"ok": True, "graph": {"lingered": True}}).encode()
        os.write(fd, data)
        os.close(fd)
        time.sleep(1000)
    elif behaviour == "big":
        extra["blob"] = "y" * (8 * 1024 * 1024)  # larger than any pipe buffer
    elif behaviour != "echo":
        raise ValueError(f"unknown behaviour {behaviour!r}")
    graph = {
        "behaviour": behaviour,
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "sid": os.getsid(0),
        "jaxPreloaded": jax_preloaded,
        "jaxReady": jax_ready,
        "resultFd": fd,
        "request": request,
        **extra,
    }
    return {"ok": True, "graph": graph}


def main(early: float | None = None) -> None:
    request = json.loads(sys.stdin.read())
    result = capture(request)
    if result is _NO_RESULT:
        return
    if early is not None:  # an early worker's bootstrap preloaded modules first (capture/launch/early.py)
        result["graph"]["early"] = early
    fd = request["resultFd"]
    data = json.dumps(result).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.close(fd)
