"""The `eventflow` command line and the process entry points it starts."""
