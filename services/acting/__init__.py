"""Slave acting master (RIP-32), the drivers: the group's member view, the escape bridge, the
hand-over to a returning master, the FIFO lock quorum and the internal ActingService.
The decisions are ``ha/acting``'s."""
