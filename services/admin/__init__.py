"""The broker/container admin gRPC service, its client, and the rules for adding brokers."""
