"""Moving a broker between containers on shared storage (issue 26) as pure decisions: the move's
state machine the controller keeps (``move``); the ownership fence is ``store.ownership``."""
