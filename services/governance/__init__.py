"""Governance: custom actions, their versions, signatures, reviews and usages."""
