"""Placeholder: this family of subcommands is being written."""


def register(subparsers, admin_subparsers) -> None:
    return None
