"""Master/slave replication with epochs (RIP-44) as pure cores: sessions, SyncStateSet, quorum."""
