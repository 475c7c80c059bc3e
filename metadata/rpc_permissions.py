"""What each client RPC and each admin command needs: one of some actions on some resources.

Rules:
- Tables of data, keyed by the gRPC method name; the inputs are plain names (the converter
  takes them out of the protobuf), the output a :class:`Needs`: the
  :class:`metadata.authorization.Requirement` list to authorize, or which name is missing.
  A request with a blank name it needs is refused before any policy is read (upstream throws
  "topic is null." / "group is null." likewise).
- Client RPCs follow upstream's ``DefaultAuthorizationContextBuilder.build(Metadata, ...)``
  (apache/rocketmq develop 8fc57f1): SendMessage, RecallMessage, EndTransaction: Pub on the
  topic; ReceiveMessage, AckMessage, ForwardMessageToDeadLetterQueue, QueryAssignment: Sub on
  the group and Sub on the topic; ChangeInvisibleDuration: Sub on the group; Heartbeat: Sub on
  the group, consumers only; NotifyClientTermination: Sub on the group when it names one;
  QueryRoute: Pub or Sub on the topic; Telemetry settings: Pub on each publishing topic, Sub on
  the subscription's group and each of its topics.  Where RelayMQ is stricter:
  SendMessage checks every message's topic (upstream only the first message's), and the RPCs
  upstream's gRPC builder forgets (they then pass unchecked there) take their remoting twins'
  rules: PullMessage, SyncLiteSubscription Sub on group and topic (PULL_MESSAGE);
  UpdateOffset Sub or Update (UPDATE_CONSUMER_OFFSET); GetOffset Sub or Get on group and
  topic (QUERY_CONSUMER_OFFSET); QueryOffset Sub or Get on the topic (GET_MAX_OFFSET,
  SEARCH_OFFSET_BY_TIMESTAMP are Get; a consumer with Sub needs it too).
- Admin commands follow the ``@RocketMQAction``/``@RocketMQResource`` annotations of
  upstream's request headers (named per rule below).  Where upstream checks nothing (a body
  instead of an annotated header, or a type-level annotation without a resource field, e.g.
  UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, UPDATE_BROKER_CONFIG, GET_ALL_TOPIC_CONFIG), RelayMQ
  still requires the nearest action: every admin command is authorized.  Cluster-wide
  commands are on ``Cluster:<the container's cluster>``.
- A retry or DLQ topic is its group's resource (:meth:`Resource.topic`).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Iterable, Mapping

from metadata.acl_model import Action, Resource
from metadata.authorization import Requirement

PUB, SUB = frozenset({Action.PUB}), frozenset({Action.SUB})
PUB_OR_SUB = frozenset({Action.PUB, Action.SUB})
SUB_OR_GET = frozenset({Action.SUB, Action.GET})
SUB_OR_UPDATE = frozenset({Action.SUB, Action.UPDATE})
CREATE, UPDATE, DELETE = frozenset({Action.CREATE}), frozenset({Action.UPDATE}), frozenset({Action.DELETE})
GET, LIST = frozenset({Action.GET}), frozenset({Action.LIST})


class Missing(str, Enum):
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"
    SETTINGS = "SETTINGS"  # a Telemetry settings command with neither publishing nor subscription


@dataclass(frozen=True)
class Needs:
    requirements: tuple[Requirement, ...] = ()
    missing: Missing | None = None


class When(str, Enum):
    ALWAYS = "ALWAYS"
    CONSUMER = "CONSUMER"          # only a consumer's call is checked (Heartbeat)
    GROUP_GIVEN = "GROUP_GIVEN"    # the group is checked when the call names one


@dataclass(frozen=True)
class ClientRule:
    group: frozenset[Action] | None = None  # actions needed on the group, None: not checked
    topic: frozenset[Action] | None = None  # actions needed on each topic named
    when: When = When.ALWAYS


_SUBSCRIBE = ClientRule(group=SUB, topic=SUB)

CLIENT_RULES: Mapping[str, ClientRule] = MappingProxyType({
    "QueryRoute": ClientRule(topic=PUB_OR_SUB),
    "Heartbeat": ClientRule(group=SUB, when=When.CONSUMER),
    "SendMessage": ClientRule(topic=PUB),
    "RecallMessage": ClientRule(topic=PUB),
    "EndTransaction": ClientRule(topic=PUB),
    "QueryAssignment": _SUBSCRIBE,
    "ReceiveMessage": _SUBSCRIBE,
    "AckMessage": _SUBSCRIBE,
    "ForwardMessageToDeadLetterQueue": _SUBSCRIBE,
    "ChangeInvisibleDuration": ClientRule(group=SUB),
    "NotifyClientTermination": ClientRule(group=SUB, when=When.GROUP_GIVEN),
    "PullMessage": _SUBSCRIBE,
    "SyncLiteSubscription": _SUBSCRIBE,
    "UpdateOffset": ClientRule(group=SUB_OR_UPDATE, topic=SUB_OR_UPDATE),
    "GetOffset": ClientRule(group=SUB_OR_GET, topic=SUB_OR_GET),
    "QueryOffset": ClientRule(topic=SUB_OR_GET),
})
TELEMETRY = "Telemetry"  # decided by its settings: telemetry_requirements


def _unique(requirements: Iterable[Requirement]) -> tuple[Requirement, ...]:
    return tuple(dict.fromkeys(requirements))


def _blank(name: str) -> bool:
    return not name or not name.strip()


def client_requirements(rpc: str, topics: Iterable[str] = (), group: str = "", consumer: bool = True) -> Needs:
    """A client RPC's requirements; ``topics``: the topic(s) it names (SendMessage: each message's)."""
    rule = CLIENT_RULES[rpc]
    topics = tuple(topics)
    if rule.when is When.CONSUMER and not consumer:
        return Needs()
    needs: list[Requirement] = []
    if rule.group is not None and not (rule.when is When.GROUP_GIVEN and _blank(group)):
        if _blank(group):
            return Needs(missing=Missing.GROUP)
        needs.append(Requirement(rule.group, Resource.group(group)))
    if rule.topic is not None:
        if not topics or any(_blank(topic) for topic in topics):
            return Needs(missing=Missing.TOPIC)
        needs += [Requirement(rule.topic, Resource.topic(topic)) for topic in topics]
    return Needs(_unique(needs))


def telemetry_requirements(publishing_topics: Iterable[str] | None = None, subscription_group: str | None = None,
                           subscription_topics: Iterable[str] = ()) -> Needs:
    """A Telemetry settings command: ``publishing_topics`` None when it has no publishing part,
    ``subscription_group`` None when it has no subscription part."""
    if publishing_topics is None and subscription_group is None:
        return Needs(missing=Missing.SETTINGS)
    needs: list[Requirement] = []
    for topic in publishing_topics or ():
        if _blank(topic):
            return Needs(missing=Missing.TOPIC)
        needs.append(Requirement(PUB, Resource.topic(topic)))
    if subscription_group is not None:
        if _blank(subscription_group):
            return Needs(missing=Missing.GROUP)
        needs.append(Requirement(SUB, Resource.group(subscription_group)))
        for topic in subscription_topics:
            if _blank(topic):
                return Needs(missing=Missing.TOPIC)
            needs.append(Requirement(SUB, Resource.topic(topic)))
    return Needs(_unique(needs))


class Target(str, Enum):
    CLUSTER = "CLUSTER"
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    TOPIC_IF_GIVEN = "TOPIC_IF_GIVEN"
    EACH_TOPIC_AND_GROUP = "EACH_TOPIC_AND_GROUP"    # every topic and group the call names
    GROUP_ELSE_TOPIC_ELSE_CLUSTER = "GROUP_ELSE_TOPIC_ELSE_CLUSTER"


@dataclass(frozen=True)
class AdminRule:
    actions: frozenset[Action]
    targets: tuple[Target, ...]
    upstream: str  # the RequestCode whose annotation this follows, or why there is none


def _rule(actions: frozenset[Action], *targets: Target, upstream: str) -> AdminRule:
    return AdminRule(actions, targets, upstream)


_C, _T, _G = Target.CLUSTER, Target.TOPIC, Target.GROUP
_AUTH_UPDATE = "AUTH_* (Cluster, Update)"
_AUTH_GET = "AUTH_GET_*/AUTH_LIST_* (Cluster, Get)"

ADMIN_RULES: Mapping[str, AdminRule] = MappingProxyType({
    "CreateOrUpdateTopic": _rule(CREATE, _T, upstream="UPDATE_AND_CREATE_TOPIC (Create, topic)"),
    "DeleteTopic": _rule(DELETE, _T, upstream="DELETE_TOPIC_IN_BROKER (Delete, topic)"),
    "ListTopics": _rule(LIST, _C, upstream="GET_TOPICS_BY_CLUSTER (List; upstream checks no resource)"),
    "CreateOrUpdateGroup": _rule(CREATE, _G, upstream="UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (unchecked upstream)"),
    "DeleteGroup": _rule(DELETE, _G, upstream="DELETE_SUBSCRIPTIONGROUP (Delete, groupName)"),
    "ListGroups": _rule(LIST, _C, upstream="GET_ALL_SUBSCRIPTIONGROUP_CONFIG (List; upstream checks no resource)"),
    "TopicStatus": _rule(GET, _T, upstream="GET_TOPIC_STATS_INFO (Get, topic)"),
    "ConsumerProgress": _rule(GET, _G, Target.TOPIC_IF_GIVEN, upstream="GET_CONSUME_STATS (Get, consumerGroup, topic)"),
    "BrokerStatus": _rule(GET, _C, upstream="VIEW_BROKER_STATS_DATA (Cluster, Get)"),
    "GetConsumerOffsets": _rule(GET, _C, upstream="GET_ALL_CONSUMER_OFFSET (unchecked upstream)"),
    "GetReplicaMetadata": _rule(GET, _C, upstream="GET_ALL_TOPIC_CONFIG and kin, the slave's sync (unchecked upstream)"),
    "WriteConsumerOffsets": _rule(UPDATE, Target.EACH_TOPIC_AND_GROUP,
                                  upstream="INVOKE_BROKER_TO_RESET_OFFSET (Update, group, topic)"),
    "ResetOffset": _rule(UPDATE, _G, _T, upstream="INVOKE_BROKER_TO_RESET_OFFSET (Update, group, topic)"),
    "QueryMessage": _rule(SUB_OR_GET, _T, upstream="QUERY_MESSAGE (Sub or Get, topic)"),
    "ClientConnections": _rule(GET, Target.GROUP_ELSE_TOPIC_ELSE_CLUSTER,
                               upstream="GET_CONSUMER_CONNECTION_LIST (Get, group), "
                                        "GET_PRODUCER_CONNECTION_LIST (Cluster, Get)"),
    "GetBrokerConfig": _rule(GET, _C, upstream="GET_BROKER_CONFIG (unchecked upstream)"),
    "UpdateBrokerConfig": _rule(UPDATE, _C, upstream="UPDATE_BROKER_CONFIG (unchecked upstream)"),
    "AddBroker": _rule(UPDATE, _C, upstream="ADD_BROKER (Cluster, Update)"),
    "RemoveBroker": _rule(UPDATE, _C, upstream="REMOVE_BROKER (Cluster, Update)"),
    "CreateUser": _rule(UPDATE, _C, upstream=_AUTH_UPDATE),
    "UpdateUser": _rule(UPDATE, _C, upstream=_AUTH_UPDATE),
    "DeleteUser": _rule(UPDATE, _C, upstream=_AUTH_UPDATE),
    "GetUser": _rule(GET, _C, upstream=_AUTH_GET),
    "ListUser": _rule(GET, _C, upstream=_AUTH_GET),
    "CreateAcl": _rule(UPDATE, _C, upstream=_AUTH_UPDATE),
    "UpdateAcl": _rule(UPDATE, _C, upstream=_AUTH_UPDATE),
    "DeleteAcl": _rule(UPDATE, _C, upstream=_AUTH_UPDATE),
    "GetAcl": _rule(GET, _C, upstream=_AUTH_GET),
    "ListAcl": _rule(GET, _C, upstream=_AUTH_GET),
})


def _target(target: Target, actions: frozenset[Action], cluster: str, topics: tuple[str, ...],
            groups: tuple[str, ...]) -> list[Requirement] | Missing:
    if target is Target.GROUP_ELSE_TOPIC_ELSE_CLUSTER:
        target = Target.GROUP if groups else Target.TOPIC if topics else Target.CLUSTER
    if target is Target.TOPIC_IF_GIVEN:
        if not topics:
            return []
        target = Target.TOPIC
    if target is Target.CLUSTER:
        return Missing.CLUSTER if _blank(cluster) else [Requirement(actions, Resource.cluster(cluster))]
    if target is Target.EACH_TOPIC_AND_GROUP:
        return (_target(Target.GROUP, actions, cluster, topics, groups) if groups else []) + \
            (_target(Target.TOPIC, actions, cluster, topics, groups) if topics else [])
    if target is Target.TOPIC:
        if not topics or any(_blank(topic) for topic in topics):
            return Missing.TOPIC
        return [Requirement(actions, Resource.topic(topic)) for topic in topics]
    if not groups or any(_blank(group) for group in groups):
        return Missing.GROUP
    return [Requirement(actions, Resource.group(group)) for group in groups]


def admin_requirements(command: str, cluster: str, topics: Iterable[str] = (), groups: Iterable[str] = ()) -> Needs:
    """An admin command's requirements.  ``topics``/``groups``: the names it carries (one for
    most commands, every distinct one for WriteConsumerOffsets); blank names are dropped."""
    rule = ADMIN_RULES[command]
    topics = tuple(dict.fromkeys(topic for topic in topics if not _blank(topic)))
    groups = tuple(dict.fromkeys(group for group in groups if not _blank(group)))
    needs: list[Requirement] = []
    for target in rule.targets:
        found = _target(target, rule.actions, cluster, topics, groups)
        if isinstance(found, Missing):
            return Needs(missing=found)
        needs += found
    if rule.targets == (Target.EACH_TOPIC_AND_GROUP,) and not needs:
        return Needs(missing=Missing.TOPIC)
    return Needs(_unique(needs))
