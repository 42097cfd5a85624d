"""LSP 3.17 notebook sync (``notebookDocument/*``): an open notebook's cells feed the index as
the notebook's module, exactly as an open ``.py`` document's text does, so lenses, hover, inlay
hints and diagnostics work on cell documents, and editing a cell marks traces stale like editing
a file. pygls keeps the notebook and its cell documents (``workspace.get_notebook_document``);
this feature rebuilds the module from them after each change."""

from __future__ import annotations

from urllib.parse import unquote

from lsprotocol import types

from jaxlsp.notebook import Cell, build_module, is_notebook
from jaxlsp.server.features.documents import Documents
from jaxlsp.server.host import Host
from jaxlsp.server.params import local_path


class Notebooks:
    def __init__(self, ls: Host, documents: Documents) -> None:
        self.ls = ls
        self.documents = documents

    def register(self, server: Host) -> None:
        @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
        def did_open(ls: Host, params: types.DidOpenNotebookDocumentParams) -> None:
            self.sync(params.notebook_document.uri)
            self.saved(params.notebook_document.uri)  # what is on disk is what was opened

        @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
        def did_change(ls: Host, params: types.DidChangeNotebookDocumentParams) -> None:
            self.sync(params.notebook_document.uri)

        @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
        def did_save(ls: Host, params: types.DidSaveNotebookDocumentParams) -> None:
            self.saved(params.notebook_document.uri)  # live shapes: what the worker reads changed

        @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
        def did_close(ls: Host, params: types.DidCloseNotebookDocumentParams) -> None:
            path = local_path(params.notebook_document.uri)
            if path is None or not is_notebook(path):
                return
            ls.notebooks.remove(path)
            if ls.session.index.close(path):
                ls.refresh_lenses()
            ls.edited(path)  # closing drops unsaved edits: the disk notebook counts again
            self.documents.report_skips(path)

    def saved(self, uri: str) -> None:
        path = local_path(uri)
        if path is not None and is_notebook(path) and self.ls.notebooks.is_open(path):
            for listener in self.ls.notebook_listeners:
                listener(path)

    def sync(self, uri: str) -> None:
        """The notebook's code cells (Python cell documents) as its module, into the index."""
        ls = self.ls
        path = local_path(uri)
        notebook = ls.workspace.get_notebook_document(notebook_uri=uri)
        if path is None or not is_notebook(path) or notebook is None:
            return  # an untitled notebook has no file to trace
        cells = []
        for index, cell in enumerate(notebook.cells):
            doc = ls.workspace.text_documents.get(unquote(cell.document))
            code = cell.kind == types.NotebookCellKind.Code and doc is not None and doc.language_id in (None, "python")
            cells.append(Cell(index, "code" if code else "markdown", doc.source if doc is not None else ""))
        ls.notebooks.update(path, [cell.document for cell in notebook.cells])
        self.documents.use_notebook(path, build_module(cells))  # summarised in slices, then its skips said
