"""Slave acting master (RIP-32), the pure decisions: who runs a group's special services, where
an acting slave's writes escape to, and the FIFO lock quorum.  Drivers: ``services/acting``."""
