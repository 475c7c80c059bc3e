"""Scripts that drive the official rocketmq-python-client 5.1.2 in a subprocess.

Its generated protobuf modules register the same symbols as ours, so it never shares a
process with RelayMQ code.  Each script prints JSON lines prefixed with ``@@`` (what it sent
and received) so the conformance tests can parse them among the client's own output.
"""
