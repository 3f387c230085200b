"""The executor: runs WebAssembly actions in a metered sandbox; nothing durable."""
