"""Limits and defaults of the client-facing gRPC protocol, one frozen dataclass.

Key names follow the RocketMQ 5 proxy (``ProxyConfig``) where it has one, so operators can
bring their settings; every limit the converters or the servicer enforce is a field here.
Times are milliseconds, sizes bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

from metadata.config import ConfigError, config_field

MiB = 1024 * 1024


@dataclass(frozen=True)
class MessagingConfig:
    grpc_server_port: int = config_field("grpcServerPort", 8081, unit="port", minimum=0, maximum=65535,
                                         doc="client-facing gRPC port (0: any free port)")
    grpc_max_inbound_message_size: int = config_field("grpcMaxInboundMessageSize", 130 * MiB, unit="bytes", minimum=4 * MiB,
                                                      doc="largest gRPC request the server accepts")
    grpc_max_outbound_message_size: int = config_field("grpcMaxOutboundMessageSize", 130 * MiB, unit="bytes", minimum=4 * MiB,
                                                       doc="largest gRPC response the server sends")
    grpc_keepalive_min_ping_interval_ms: int = config_field("grpcKeepAliveMinPingIntervalMillis", 10_000, unit="ms", minimum=1_000,
                                                            doc="shortest client ping interval tolerated without calls")
    max_message_size: int = config_field("maxMessageSize", 4 * MiB, unit="bytes", minimum=1,
                                         doc="largest message body; also sent to producers as publishing.max_body_size")
    user_property_max_num: int = config_field("userPropertyMaxNum", 128, unit="properties", minimum=0,
                                              doc="most user properties on one message")
    max_user_property_size: int = config_field("maxUserPropertySize", 16 * 1024, unit="bytes", minimum=0,
                                               doc="total UTF-8 size of one message's user property keys and values")
    max_message_group_size: int = config_field("maxMessageGroupSize", 64, unit="bytes", minimum=1,
                                               doc="a FIFO message_group must be shorter than this")
    max_message_id_size: int = config_field("maxMessageIdSize", 128, unit="bytes", minimum=1, doc="longest message id")
    max_key_num: int = config_field("maxMessageKeyNum", 64, unit="keys", minimum=0, doc="most keys on one message")
    max_tag_size: int = config_field("maxMessageTagSize", 1024, unit="bytes", minimum=1, doc="longest tag")
    max_send_batch_num: int = config_field("maxSendMessageBatchNum", 1024, unit="messages", minimum=1,
                                           doc="most messages in one SendMessage request")
    max_delay_time_ms: int = config_field("maxDelayTimeMills", 86_400_000, unit="ms", minimum=0,
                                          doc="how far ahead a DELAY message may be scheduled")
    min_invisible_time_ms: int = config_field("minInvisibleTimeMillsForRecv", 10_000, unit="ms", minimum=0,
                                              doc="shortest invisible duration a ReceiveMessage may ask for")
    max_invisible_time_ms: int = config_field("maxInvisibleTimeMills", 43_200_000, unit="ms", minimum=1,
                                              doc="longest invisible duration (receive and change)")
    auto_renew_invisible_time_ms: int = config_field("defaultInvisibleTimeMills", 60_000, unit="ms", minimum=1,
                                                     doc="invisible duration chosen for auto_renew (push) consumers")
    min_long_polling_ms: int = config_field("grpcClientConsumerMinLongPollingTimeoutMillis", 5_000, unit="ms", minimum=0,
                                            doc="shortest long poll; less deadline than this left gives ILLEGAL_POLLING_TIME")
    max_long_polling_ms: int = config_field("grpcClientConsumerMaxLongPollingTimeoutMillis", 20_000, unit="ms", minimum=0,
                                            doc="longest long poll; also sent to consumers as subscription.long_polling_timeout")
    long_polling_reserve_ms: int = config_field("longPollingReserveTimeInMillis", 200, unit="ms", minimum=0,
                                                doc="margin kept before the client's deadline to write the reply")
    backlog_probe_interval_ms: int = config_field(
        "receiveBacklogProbeIntervalMillis", 500, unit="ms", minimum=0, maximum=60_000,
        doc="while a SimpleConsumer's receive waits here with nothing to take, the other brokers of its topic are asked "
            "this often whether they hold messages for its group; one that does ends the wait at once (0: never ask)")
    backlog_fresh_ms: int = config_field(
        "receiveBacklogFreshMillis", 1_000, unit="ms", minimum=1, maximum=600_000,
        doc="an answer to that question is trusted this long (at least receiveBacklogProbeIntervalMillis)")
    receive_batch_size: int = config_field("grpcClientConsumerLongPollingBatchSize", 32, unit="messages", minimum=1,
                                           doc="receive_batch_size sent to consumers; larger requested batches are clamped")
    max_ack_entry_num: int = config_field("maxAckMessageEntryNum", 1024, unit="entries", minimum=1,
                                          doc="most entries in one AckMessage request")
    max_receipt_handle_size: int = config_field("maxReceiptHandleSize", 4096, unit="bytes", minimum=16,
                                                doc="longest receipt, recall or transaction handle accepted")
    max_filter_expression_size: int = config_field("maxFilterExpressionSize", 16 * 1024, unit="bytes", minimum=1,
                                                   doc="longest TAG or SQL filter expression")
    producer_max_attempts: int = config_field("producerMaxAttempts", 3, unit="attempts", minimum=1,
                                              doc="backoff_policy.max_attempts sent to producers")
    producer_backoff_initial_ms: int = config_field("producerBackoffInitialMillis", 10, unit="ms", minimum=0)
    producer_backoff_max_ms: int = config_field("producerBackoffMaxMillis", 1_000, unit="ms", minimum=0)
    producer_backoff_multiplier: float = config_field("producerBackoffMultiplier", 2.0, unit="factor", minimum=1.0)
    telemetry_outbox_size: int = config_field("telemetryOutboxSize", 1024, unit="commands", minimum=1,
                                              doc="server commands queued per Telemetry stream before pushes are refused")
    client_idle_timeout_ms: int = config_field("clientIdleTimeoutMillis", 120_000, unit="ms", minimum=1_000,
                                               doc="a client without heartbeat or stream for this long is forgotten")
    max_clients: int = config_field("maxClientNum", 100_000, unit="clients", minimum=1,
                                    doc="most client ids remembered by the client registry")
    authentication_enabled: bool = config_field("authenticationEnabled", False,
                                                doc="check every call's MQv2-HMAC-SHA1 signature against authenticationAccountsFile; "
                                                    "refused calls get UNAUTHORIZED (40100)")
    authentication_accounts_file: str = config_field("authenticationAccountsFile", "",
                                                     doc="TOML file of [[accounts]] tables with accessKey and secretKey "
                                                         "(relative to the container file); required when authenticationEnabled")
    authentication_max_clock_skew_ms: int = config_field("authenticationMaxClockSkewMillis", 900_000, unit="ms", minimum=0,
                                                         doc="how far x-mq-date-time may be from the server's UTC or local "
                                                             "time (clients send local time); 0: not checked")
    authentication_provider: str = config_field(
        "authenticationProvider", "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
        doc="RocketMQ's provider class; only its default (the MQv2-HMAC-SHA1 signature) is supported")
    authorization_enabled: bool = config_field(
        "authorizationEnabled", False,
        doc="check every client call and every admin call against the ACLs of authorizationMetadataFile (RocketMQ "
            "ACL 2.0); refused client calls get FORBIDDEN (40300), admin calls PERMISSION_DENIED; needs "
            "authenticationEnabled")
    authorization_provider: str = config_field(
        "authorizationProvider", "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
        doc="RocketMQ's provider class; only its default (ACL 2.0 policies) is supported")
    authorization_metadata_file: str = config_field(
        "authorizationMetadataFile", "",
        doc="TOML file of [[users]] and [[acls]] (docs/security.md; relative to the container file); when set, its "
            "users are the accounts authentication checks; watched while running, rewritten by the user and ACL "
            "admin commands; required when authorizationEnabled.  When the container's brokers run in "
            "enableControllerMode the users and ACLs live in the controller instead: this file only seeds a "
            "controller that has none yet, and is neither watched nor rewritten")
    authorization_metadata_watch_interval_ms: int = config_field(
        "authorizationMetadataWatchIntervalMillis", 1_000, unit="ms", minimum=100, maximum=60_000,
        doc="how often authorizationMetadataFile is checked for changes (modification time, size, inode); under a "
            "controller, how often the controller is asked whether its users and ACLs moved (a reply of a few "
            "bytes unless they did)")
    authorization_metadata_sync_timeout_ms: int = config_field(
        "authorizationMetadataSyncTimeoutMillis", 5_000, unit="ms", minimum=0, maximum=60_000,
        doc="under a controller, how long a starting container waits for the controller's users and ACLs before it "
            "serves with its cached copy (or its authorizationMetadataFile); it keeps asking afterwards")
    inner_client_authentication_credentials: str = config_field(
        "innerClientAuthenticationCredentials", "",
        doc='what this container signs its own admin calls to other containers with (a slave\'s metadata sync), '
            'as RocketMQ writes it: {"accessKey": "...", "secretKey": "..."}; needed where the master\'s container '
            'has authorizationEnabled (a user allowed Get on the cluster, or a super user)')
    broker_endpoint_hold_ms: int = config_field("brokerEndpointHoldMillis", 3_000, unit="ms", minimum=0,
                                                maximum=60_000,
                                                doc="a call on a broker's own endpoint (listenPort) while its group has "
                                                    "no master in reach waits this long at most (never past the "
                                                    "caller's deadline) for a master to serve or relay to")
    broker_endpoint_max_connection_age_ms: int = config_field(
        "brokerEndpointMaxConnectionAgeMillis", 20_000, unit="ms", minimum=0, maximum=86_400_000,
        doc="a client connection to a broker's own endpoint (listenPort) is ended (HTTP/2 GOAWAY, the client "
            "reconnects at once) after this long, so that clients that moved to another replica's endpoint "
            "during a failover come back to the master's own and stop being relayed (0: never)")
    broker_endpoint_max_connection_age_grace_ms: int = config_field(
        "brokerEndpointMaxConnectionAgeGraceMillis", 30_000, unit="ms", minimum=0, maximum=86_400_000,
        doc="calls in flight on such a connection may still finish within this (longer than the longest long poll)")

    def __post_init__(self) -> None:
        if self.backlog_probe_interval_ms and self.backlog_fresh_ms < self.backlog_probe_interval_ms:
            raise ConfigError("messaging config", "receiveBacklogFreshMillis",
                              f"{self.backlog_fresh_ms} is shorter than receiveBacklogProbeIntervalMillis "
                              f"{self.backlog_probe_interval_ms}: every answer would be stale before the next one")
        if self.broker_endpoint_max_connection_age_ms and \
                self.broker_endpoint_max_connection_age_grace_ms < self.max_long_polling_ms:
            raise ConfigError("messaging config", "brokerEndpointMaxConnectionAgeGraceMillis",
                              f"{self.broker_endpoint_max_connection_age_grace_ms} is shorter than "
                              f"grpcClientConsumerMaxLongPollingTimeoutMillis {self.max_long_polling_ms}: a long "
                              "poll on an aged connection would be cut")
