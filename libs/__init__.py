"""Code every eventflow service shares: config, db, bus, auth, telemetry, errors."""
