"""The client-facing RocketMQ 5 gRPC protocol: converters, servicer, client registry, server mount."""
