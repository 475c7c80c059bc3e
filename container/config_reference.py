"""Generate ``docs/configuration.md`` from the config dataclasses' declarations.

The declarations (``metadata.config.config_field``) are the one place where a key's unit
and default are written; this renders them.  ``python -m container.config_reference``
rewrites the file; ``tests/unit/test_config_reference.py`` fails when it is stale.
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

from metadata.config import describe

SECTIONS = (
    ("Container (top level of a container file)", "container.config", "ContainerConfig"),
    ("Client protocol (top level of a container file)", "services.messaging.config", "MessagingConfig"),
    ("Broker (each [[broker]] table or broker file)", "services.broker.config", "BrokerConfig"),
    ("Store (each [[broker]] table or broker file)", "store.config", "StoreConfig"),
    ("Replication (each [[broker]] table or broker file)", "ha.replication.config", "HaConfig"),
    ("Nameserver (standalone file, or top level of a container file)", "services.nameserver.config", "NamesrvConfig"),
    ("Controller (controller file, or nameserver file with enableControllerInNamesrv)", "services.controller.config", "ControllerConfig"),
    ("Cluster authentication (top level of a container, nameserver or controller file)", "services.cluster_auth", "ClusterAuthConfig"),
)

TARGET = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def render() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Generated from the config declarations by `python -m container.config_reference`; do not edit by hand.",
        "Keys are RocketMQ's names where RocketMQ has one. Files are `.toml` or `.properties`.",
        "An unknown key is an error naming the file and key.",
        "",
    ]
    for title, module, name in SECTIONS:
        cls = getattr(importlib.import_module(module), name)
        lines += [f"## {title}", "", "| key | default | unit | meaning |", "|---|---|---|---|"]
        for key, default, unit, doc in describe(cls):
            lines.append(f"| `{key}` | `{default}` | {unit} | {doc} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    TARGET.write_text(render(), encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
