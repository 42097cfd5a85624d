/**
 * Notebook cells: the server syncs Jupyter notebooks cell by cell (LSP notebook sync), so a
 * location may be a cell's document (`vscode-notebook-cell:`). Showing one opens its notebook with
 * the cell selected, then puts the selection in the cell.
 */
import * as vscode from "vscode";

/** The URI schemes of documents the server analyses: files, and the cells of open notebooks. */
export const CELL_SCHEME = "vscode-notebook-cell";

export function isAnalysed(uri: vscode.Uri): boolean {
  return uri.scheme === "file" || uri.scheme === CELL_SCHEME;
}

/** Show `uri` at `selection`: a notebook cell inside its notebook editor, anything else as a text editor. */
export async function showLocation(uri: vscode.Uri, selection: vscode.Range, viewColumn: vscode.ViewColumn): Promise<void> {
  if (uri.scheme === CELL_SCHEME) {
    for (const notebook of vscode.workspace.notebookDocuments) {
      const cell = notebook.getCells().find((c) => c.document.uri.toString() === uri.toString());
      if (cell === undefined) continue;
      const range = new vscode.NotebookRange(cell.index, cell.index + 1);
      const editor = await vscode.window.showNotebookDocument(notebook, { viewColumn, selections: [range] });
      editor.revealRange(range, vscode.NotebookEditorRevealType.InCenterIfOutsideViewport);
      await vscode.window.showTextDocument(cell.document, { selection, viewColumn: editor.viewColumn ?? viewColumn, preserveFocus: false });
      return;
    }
  }
  await vscode.window.showTextDocument(uri, { selection, viewColumn, preserveFocus: false });
}
