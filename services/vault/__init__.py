"""The vault: secrets of custom actions, envelope-encrypted at rest, read by the executor only."""
