"""A broker's role under the controller (RIP-44, reference 4.6) as pure decisions: identity
registration, role changes, and the fence a master keeps after a pause."""
