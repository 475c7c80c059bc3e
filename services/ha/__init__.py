"""Drivers of replication: the masters HaService, the slaves client, metadata sync."""
