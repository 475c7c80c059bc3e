"""``relaymq``: the command line.

Each family of subcommands lives in its own module with a ``register(subparsers,
admin_subparsers)`` function; this module only assembles them and turns the errors users
can cause into one clear line and a non-zero exit code (never a traceback).

Rules:
- ``relaymq`` or ``relaymq admin`` alone print their help and exit 0; ``--version`` prints
  the installed version.
- Commands are kebab-case.  A command may keep an old name as a visible alias
  (``list-topic`` for ``topic-list``) and answer to mqadmin's camelCase name
  (``topicList``) as a hidden one; an option may keep an old spelling hidden from help
  (:data:`HIDDEN_OPTION_STRINGS`, or an action's own ``hidden_option_strings``).
"""
from __future__ import annotations

import argparse
import os
import importlib
import sys

# (module, what it adds); each module has register(subparsers, admin_subparsers) -> None
SUBCOMMAND_MODULES = (
    "container.cli_container",  # container, namesrv
    "container.cli_admin",  # admin: topics, groups, add/remove broker
    "container.cli_status",  # admin: topic-list, topic-route, topic-status, consumer-progress, cluster-list, broker-status
    "container.cli_ops",  # admin: offsets, messages, connections, broker config
    "container.cli_ha",  # admin ha-status
    "container.cli_acting",  # admin broker-member-group
    "container.cli_controller",  # controller, admin controller commands
    "container.cli_offset_diff",  # offset-diff
    "container.cli_acl",  # admin: users and ACLs, migrate-acl
    "container.cli_reassign",  # admin reassign-broker
)
# old option spellings still accepted, not shown in help
HIDDEN_OPTION_STRINGS = frozenset({"--broker-name", "-bn"})


class CliError(Exception):
    """A user error: printed as one line, exit code ``code``."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


class HelpFormatter(argparse.HelpFormatter):
    def _format_action_invocation(self, action: argparse.Action) -> str:
        hidden = HIDDEN_OPTION_STRINGS | getattr(action, "hidden_option_strings", frozenset())
        shown = [s for s in action.option_strings if s not in hidden]
        if shown != list(action.option_strings):
            action = argparse.Action(shown, action.dest, action.nargs, metavar=action.metavar, help=action.help)
        return super()._format_action_invocation(action)


def add_command(subparsers: argparse._SubParsersAction, name: str, help_text: str, aliases: tuple[str, ...] = (),
                hidden_aliases: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """A subcommand with visible ``aliases`` and ``hidden_aliases`` that only the parser knows."""
    parser = subparsers.add_parser(name, help=help_text, aliases=list(aliases), formatter_class=HelpFormatter,
                                   description=help_text)
    for alias in hidden_aliases:
        subparsers._name_parser_map[alias] = parser
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("relaymq")
    except Exception:  # noqa: BLE001 - running from a checkout without installing
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relaymq", description="RelayMQ: a RocketMQ 5 compatible message broker",
                                     formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"relaymq {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    admin = subparsers.add_parser("admin", help="administer a running cluster (mqadmin's operations)",
                                  formatter_class=HelpFormatter)
    add_credential_arguments(admin)
    admin_sub = admin.add_subparsers(dest="admin_command", metavar="ADMIN_COMMAND")
    parser.set_defaults(handler=lambda args: _help(parser))
    admin.set_defaults(handler=lambda args: _help(admin))
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(subparsers, admin_sub)
    return parser


def add_credential_arguments(parser: argparse.ArgumentParser) -> None:
    """What a command calling admin APIs signs with (``relaymq admin``, ``relaymq offset-diff``);
    :func:`container.cli_admin.set_caller_credentials` reads them."""
    parser.add_argument("--access-key", default=None, metavar="KEY",
                        help="sign admin calls as this user (needed where authorizationEnabled); "
                             "default: $RELAYMQ_ACCESS_KEY")
    parser.add_argument("--secret-key", default=None, metavar="SECRET",
                        help="the user's secret (visible to other local users in the process list: "
                             "prefer $RELAYMQ_SECRET_KEY)")
    parser.add_argument("--cluster-secret-file", default=None, metavar="FILE",
                        help="prove the cluster secret (clusterAuthenticationSecretFile of the cluster's members) "
                             "on every call: needed to reach a nameserver, controller or container internal port "
                             "that checks it; default: $RELAYMQ_CLUSTER_SECRET_FILE")


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "admin":
            from container.cli_admin import set_caller_credentials
            set_caller_credentials(args)
        result = args.handler(args)
    except CliError as exc:
        print(f"relaymq: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (``relaymq admin ... | head``): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
