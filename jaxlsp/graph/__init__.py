"""The canonical graph: stdlib-only types shared by the capture worker and the server."""
