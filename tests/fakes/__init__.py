"""Fakes of external systems, speaking their real interfaces (see each module)."""
