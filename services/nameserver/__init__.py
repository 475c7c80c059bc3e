"""The nameserver: broker registration, liveness, routes and cluster info over gRPC."""
