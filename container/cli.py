"""``relaymq``: the command line.

Each family of subcommands lives in its own module with a ``register(subparsers)``
function; this module only assembles them and turns the errors users can cause into one
clear line and a non-zero exit code (never a traceback).
"""
from __future__ import annotations

import argparse
import importlib
import sys

# (module, what it adds); each module has register(subparsers) -> None
SUBCOMMAND_MODULES = (
    "container.cli_container",  # container, namesrv
    "container.cli_admin",  # admin ...
    "container.cli_ha",  # admin ha-status
    "container.cli_controller",  # controller, admin controller commands
    "container.cli_offset_diff",  # offset-diff
)


class CliError(Exception):
    """A user error: printed as one line, exit code ``code``."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relaymq", description="RelayMQ: a RocketMQ 5 compatible message broker")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    admin = subparsers.add_parser("admin", help="administer a running cluster")
    admin_sub = admin.add_subparsers(dest="admin_command", metavar="ADMIN_COMMAND")
    admin_sub.required = True
    parser.set_defaults(admin_subparsers=admin_sub)
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(subparsers, admin_sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.handler(args)
    except CliError as exc:
        print(f"relaymq: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
