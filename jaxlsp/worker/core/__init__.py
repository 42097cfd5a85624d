"""What every room of the worker shares: the wire protocol, structured failures, path spelling,
package versions, phase announcements and the offline guard. Stdlib only (and
``jaxlsp.notebook``); imports no other room."""
