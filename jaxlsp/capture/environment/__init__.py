"""Which interpreter runs a capture and with what: the interpreter chosen for a workspace, the user's
``sys.path`` additions, the environment variables a capture may see, the package compatibility
check, the install advice, and the TPU pod check."""
