"""The controller's drivers: config, Raft driver, gRPC service and transport, client."""
