"""The template of the static HTML export: the viewer bundle (``jaxlsp/viewer``) inlined with the
graph, in the viewer's ``static`` mode (docs/viewer.md).

The Content-Security-Policy forbids every network request; the only code is inline, and the ELK
layout worker comes from a Blob URL (``worker-src blob:``).
"""

from __future__ import annotations

CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; worker-src blob:; img-src data: blob:"

HEAD = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>jaxlsp graph: $TITLE</title>
"""

# The graph element comes first; this boot script reads it as data, never as code.
BOOT = """<script>
window.JAXLSP_VIEWER = {mode: "static", graph: JSON.parse(document.getElementById("graph-data").textContent)};
</script>
"""
