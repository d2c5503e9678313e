"""The ``synapse shards ...`` commands: HAProxy's configuration for several memory
servers, which shard owns a namespace, and moving namespaces when the shards change
(:mod:`.shards`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from .targets import ENV_KEY, api_key

__all__ = ["add_shard_commands"]


def cmd_shards_haproxy(args: argparse.Namespace) -> int:
    from .shards import parse_shards, write_haproxy

    cfg = write_haproxy(args.out, parse_shards(args.shard), bind=args.bind)
    print(f"wrote {cfg} and its Lua router; run: haproxy -f {cfg}")
    return 0


def cmd_shards_rebalance(args: argparse.Namespace) -> int:
    from .shards import parse_shards, rebalance

    report = rebalance(parse_shards(args.shard), parse_shards(args.new_shard), finish=args.finish,
                       api_key=api_key(args), log=lambda line: print(line, file=sys.stderr))
    print(json.dumps({k: v for k, v in report.items() if k != "moved"} | {"namespaces": len(report["moved"])}))
    if not args.finish:
        print("now reload HAProxy with the new shards (synapse shards haproxy ...), then run this "
              "again with --finish", file=sys.stderr)
    return 0


def cmd_shards_owner(args: argparse.Namespace) -> int:
    from .shards import owner, parse_shards

    shards = parse_shards(args.shard)
    for ns in args.namespace:
        name = owner(ns, list(shards))
        print(f"{ns}\t{name}\t{shards[name]}")
    return 0


def add_shard_commands(sub: Any, wrap: Callable[[Any], Any]) -> None:
    """Add ``shards haproxy|rebalance|owner`` to the console script's subparsers
    (``wrap``: the CLI's error handling around each command)."""
    shards = sub.add_parser("shards", help="namespaces spread over several servers behind HAProxy")
    shsub = shards.add_subparsers(dest="shards_command", required=True)
    shard_list = argparse.ArgumentParser(add_help=False)
    shard_list.add_argument("--shard", action="append", required=True, metavar="NAME=HOST:PORT",
                            help="a memory server, in a fixed order (repeat; the name is hashed: "
                                 "keep it when the address changes)")
    hp = shsub.add_parser("haproxy", parents=[shard_list],
                          help="write an HAProxy configuration routing each namespace to its shard")
    hp.add_argument("--bind", default="127.0.0.1:8765", help="the proxy's address (default 127.0.0.1:8765)")
    hp.add_argument("--out", required=True, metavar="DIR", help="where to write haproxy.cfg and its files")
    hp.set_defaults(func=wrap(cmd_shards_haproxy))
    rb = shsub.add_parser("rebalance", parents=[shard_list],
                          help="move the namespaces whose owner changes to the new shards: "
                               "freeze, copy, check; then, with --finish, erase at the sources")
    rb.add_argument("--new-shard", action="append", required=True, metavar="NAME=HOST:PORT",
                    help="the shards after the change (repeat)")
    rb.add_argument("--finish", action="store_true",
                    help="the proxy routes to the new shards now: copy what is left, erase at the sources")
    rb.add_argument("--api-key", help=f"the servers' key (default: ${ENV_KEY})")
    rb.set_defaults(func=wrap(cmd_shards_rebalance))
    ow = shsub.add_parser("owner", parents=[shard_list], help="which shard owns each namespace")
    ow.add_argument("namespace", nargs="+")
    ow.set_defaults(func=wrap(cmd_shards_owner))
