"""The RIP-44 controller's replica-group state machine (pure: no I/O, no clocks).

``events`` are what Raft replicates, ``replicas`` holds the replicated tables and applies
events, ``liveness`` holds the leader's (unreplicated) view of broker heartbeats,
``election`` is the election policy, and ``commands`` decides each controller request
into ``Decision(events, reply)``.
"""
