"""A deterministic simulation of one broker group on the pure replication and failover cores.

See simulation.py for what it runs and invariants.py for what it checks.
"""
