"""A worker's compact (version 2) object checked as ``io.from_json`` checks it, and the graph file
``io.write(graph, compact=True)`` writes of it, made without a model object per node and value
(:class:`CompactFile`: ``jaxlsp trace -o``).

Stdlib only, Python >= 3.10. Where the rest of jaxlsp imports the compact form from: besides
:class:`CompactFile` this module gives :class:`~jaxlsp.graph.packed.Packed` and
:func:`~jaxlsp.graph.compact_write.encode` (the compact form held, and written).
"""

from __future__ import annotations

import json
from typing import Any

from jaxlsp.graph import strict
from jaxlsp.graph.compact_write import encode
from jaxlsp.graph.expanded_write import node_json, to_json, value_json
from jaxlsp.graph.model import COMPACT_VERSION
from jaxlsp.graph.packed import Packed

__all__ = ["CompactFile", "Packed", "encode"]


class CompactFile:
    """A worker's compact (version 2) object checked as :func:`jaxlsp.graph.io.from_json` checks
    it, and the file ``io.write(graph, compact=True)`` writes of the graph it reads to, without a
    model object per node and value: ``jaxlsp trace -o``'s way (at 100,000 equations the decode
    into model objects and the encode back were 20 s of a 125 s cold trace).

    The columns are checked as :class:`Packed` reads them; what ``from_json`` checks beyond them
    is checked here: each distinct params object once (non-finite numbers), the strings that must
    not be empty (ids, primitives, dtypes), and every row with optional members (``costs``,
    ``literal``, ``stats``, ``sharding``, ...), which is read as a model object, so its members
    are checked by their readers and written back as those readers give them. The header's
    sections are read the same way (:meth:`Packed.shell`) and written from what was read. So
    :attr:`data` is ``io.to_compact(io.from_json(data))``, made of the worker's own lists."""

    def __init__(self, data: Any) -> None:
        try:
            self.packed = packed = Packed(data)
            shell = packed.shell()
            self._check_params()
            self._check_strings()
            node_extra = self._rows_members(packed.node_extra, packed.node, node_json)
            value_extra = self._rows_members(packed.value_extra, packed.value, value_json)
        except (TypeError, KeyError, IndexError) as exc:  # what the columns' checks did not foresee
            raise ValueError(f"<graph>: {type(exc).__name__}: {exc}") from None
        nodes = {**data["nodes"], "extra": _members(data["nodes"]["extra"] or {}, node_extra)}
        values = {**data["values"], "extra": _members(data["values"]["extra"] or {}, value_extra)}
        out: dict[str, Any] = {}
        for key, item in to_json(shell).items():  # encode's layout: tables just before nodes
            if key == "nodes":
                out["tables"] = data["tables"]
                out["nodes"] = nodes
            else:
                out[key] = values if key == "values" else item
        out["version"] = COMPACT_VERSION
        self.data = out
        self.graph = shell  # the small parts as model objects: ports, groups, sections

    def text(self) -> str:
        """The file's JSON text (``io.dumps(graph, compact=True)``)."""
        return json.dumps(self.data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)

    def _check_params(self) -> None:
        packed = self.packed
        for k in range(len(packed.params)):  # kept as the model holds them: node() reuses them
            packed.model_params(k)

    def _check_strings(self) -> None:
        packed = self.packed
        if "" not in packed.strings:
            return
        empty = {k for k, text in enumerate(packed.strings) if not text}
        columns = [("nodes", "primitive", packed.primitive), ("values", "dtype", packed.dtype)]
        for what, name, column in columns:
            for k in empty:
                if k in column:
                    raise strict.fail(f"{what}[{column.index(k)}].{name}", "expected a non-empty string")
        for what, ids in (("nodes", packed.node_ids), ("values", packed.value_ids)):
            if ids is not None and "" in ids:
                raise strict.fail(f"{what}[{ids.index('')}].id", "expected a non-empty string")

    @staticmethod
    def _rows_members(extra: dict[str, dict[int, str]], row: Any, spell: Any) -> dict[str, dict[int, Any]]:
        """Each optional member of each row that has one, as the model object read from the row
        spells it (``node_json`` / ``value_json``): member name -> row -> JSON value, in
        row order; a member its reader drops (a null ``costs``) is absent."""
        out: dict[str, dict[int, Any]] = {key: {} for key in extra}
        for i in sorted({i for rows in extra.values() for i in rows}):
            spelled = spell(row(i))
            for key, rows in extra.items():
                if i in rows and key in spelled:
                    out[key][i] = spelled[key]
        return out


def _members(sent: dict[str, Any], canonical: dict[str, dict[int, Any]]) -> dict[str, Any]:
    """``extra`` with each member as read back (``canonical``), by row, in the order of the
    members as sent (encode's: as first met); a member no row keeps is left out, as encode does."""
    out: dict[str, Any] = {}
    for key, pairs in sent.items():
        rows = canonical.get(key)
        kept = pairs if rows is None else [[i, member] for i, member in rows.items()]
        if kept:
            out[key] = kept
    return out
