"""The ``synapse serve`` and operator subcommands (registered by :mod:`synapse_integrations.cli`).

``synapse serve http --path DIR [--host 127.0.0.1 --port 8765] [--api-key KEY] [--key-file FILE] [--mcp] [--ui]``
    the REST API (with ``--mcp``, the MCP tools at ``/mcp`` on the same memories; with
    ``--ui``, the explorer page at ``/ui/``: docs/explorer.md);
``synapse serve mcp --path DIR [--transport stdio|http] [--host --port] [--api-key KEY] [--key-file FILE]``
    the MCP server.

``--api-key`` is one key for every namespace (one-user setups); ``--key-file`` (or the same
JSON in ``SYNAPSE_API_KEYS``) holds one key per app or tenant, each bound to namespace
patterns (:mod:`.access`). SIGTERM or SIGINT stops a server gracefully: the final snapshot
is written, and it exits 0.

Operator commands work on a folder directly (``--path DIR``: they take its lock, so no
server may hold it) or on a server (``--url URL [--api-key KEY]``; the two targets are in
:mod:`.targets`), one namespace at a time (``--namespace``, default ``default``)::

    synapse add "Dana moved to Lisbon." --speaker Sam --path ./memory
    synapse query "Where does Dana live?" --url http://127.0.0.1:8765 --namespace user_id=42
    synapse query "Where does Dana live?" --as-of 2024-03-01 [--current-only]
    synapse inspect [ID] [--query Q]      synapse inspect NAMESPACE --html FILE [--query Q]
    synapse history ID      synapse verify      synapse repair
    synapse forget [IDS...] [--speaker S] [--since T] [--until T] [--where JSON] [--everything]
    synapse export --out backup.jsonl [--with-vectors]
    synapse import backup.jsonl

The API key may also come from the ``SYNAPSE_API_KEY`` environment variable. Long work
(export, import) shows a progress bar on stderr (``--no-progress`` turns it off).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from ..core.kernels import threads
from ..errors import InvalidInputError, SynapseError
from ..pool import DEFAULT_MAX_OPEN
from .targets import ENV_KEY, api_key, open_target

__all__ = ["add_commands"]

DEFAULT_PORT = 8765
ENV_KEYS = "SYNAPSE_API_KEYS"


def _progress(iterable: Iterable[Any], *, total: int | None, desc: str, enabled: bool) -> Iterable[Any]:
    if not enabled:
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, total=total, desc=desc, unit="turn", file=sys.stderr)


def _json_arg(value: str | None, what: str) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError as exc:
        raise InvalidInputError(f"{what} must be JSON: {exc}") from None


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


# ---------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------
def cmd_add(args: argparse.Namespace) -> int:
    turns = [{"text": text, "speaker": args.speaker, "timestamp": args.timestamp,
              "metadata": _json_arg(args.metadata, "--metadata"), "id": args.id}
             for text in args.text]
    if args.id and len(turns) > 1:
        raise InvalidInputError("--id names one turn; give one text with it")
    turns = [{k: v for k, v in t.items() if v is not None} for t in turns]
    with open_target(args) as target:
        for node_id in target.add(turns):
            print(node_id)
    return 0


def _when(item: dict[str, Any]) -> str:
    return item["timestamp"][:10] if item.get("timestamp") else "concept"


def cmd_query(args: argparse.Namespace) -> int:
    with open_target(args) as target:
        out = target.retrieve(args.query, args.k, speakers=args.speaker or None, since=args.since,
                              until=args.until, where=_json_arg(args.where, "--where"),
                              kinds=("episode", "concept") if args.concepts else ("episode",),
                              as_of=args.as_of, current_only=args.current_only, at=args.at)
    if args.json:
        _print_json(out)
        return 0
    print(f"gate: {out['gate']['decision']} ({out['gate']['reason']})")
    for rank, it in enumerate(out["items"], 1):
        c = it["components"]
        via = f"  concepts: {', '.join(it['concepts'])}" if it.get("concepts") else ""
        who = f"{it['speaker']}: " if it.get("speaker") and not it["text"].startswith(f"{it['speaker']}:") else ""
        print(f"{rank:>3}. [{_when(it)}] score {it['score']:.3f} (cos {c['similarity']:.2f}, "
              f"act {c['activation']:.2f}, pr {c['pagerank']:.2f}) {who}{it['text'][:100]}  "
              f"[{it['id']}]{via}")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    if args.html:  # one self-contained page of the explorer's views (docs/explorer.md)
        from .ui.report import cmd_inspect_html

        return cmd_inspect_html(args)
    with open_target(args) as target:
        out = target.inspect(args.id, args.query)
    if args.json or args.id is None:
        _print_json(out)
        return 0
    node = out["memory"]
    print(f"{node['id']} ({node.get('kind')}{', archived' if out['archived'] else ''}): {node.get('text')}")
    for key in ("speaker", "ts", "metadata"):
        if node.get(key) is not None:
            value = node[key]
            if key == "ts":
                value = datetime.fromtimestamp(value, tz=timezone.utc).isoformat()
            print(f"  {key}: {value}")
    for link in out["links"][:15]:
        print(f"  -> {link['edge']} {link['weight']:.2f} {link['kind']} {str(link['text'])[:60]!r}")
    if "query" in out:
        q = out["query"]
        if q["rank"] is None:
            print(f"  query {q['query']!r}: not ranked")
        else:
            it = q["item"]
            print(f"  query {q['query']!r}: rank {q['rank']}, score {it['score']:.3f}, "
                  f"components {it['components']}, path {it['path']}")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    with open_target(args) as target:
        versions = target.history(args.id)
    if args.json:
        _print_json(versions)
        return 0
    for v in versions:
        held = f"{_iso(v['valid_from'])} .. {_iso(v['valid_until']) if v['valid_until'] is not None else 'now'}"
        print(f"[{held}] {str(v.get('text'))[:100]}  [{v['id']}]")
    return 0


def _iso(ts: float | None) -> str:
    return "?" if ts is None else datetime.fromtimestamp(ts, tz=timezone.utc).isoformat()


def _report(report: dict[str, Any], as_json: bool) -> int:
    if as_json:
        _print_json(report)
    else:
        print(f"{'ok' if report['ok'] else 'NOT OK'}: {report['episodes']} episodes, "
              f"{report['concepts']} concepts, {report['archived']} archived, {report['vectors']} vectors")
        for line in report["problems"]:
            print(f"  problem: {line}")
        for line in report["actions"]:
            print(f"  repaired: {line}")
    return 0 if report["ok"] else 1


def cmd_verify(args: argparse.Namespace) -> int:
    with open_target(args) as target:
        return _report(target.verify(), args.json)


def cmd_repair(args: argparse.Namespace) -> int:
    with open_target(args) as target:
        return _report(target.repair(), args.json)


def cmd_forget(args: argparse.Namespace) -> int:
    with open_target(args) as target:
        removed = target.forget(args.ids or None, speaker=args.speaker, since=args.since,
                                until=args.until, where=_json_arg(args.where, "--where"),
                                everything=args.everything)
    if args.json:
        _print_json({"removed": removed})
    else:
        print(f"removed {len(removed)} memories")
        for node_id in removed:
            print(f"  {node_id}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .transfer import write_lines

    with open_target(args) as target:
        lines = target.export(args.with_vectors)
        total = len(lines) if isinstance(lines, list) else None
        lines = _progress(lines, total=total, desc="exporting", enabled=not args.no_progress)
        if args.out in (None, "-"):
            n = write_lines(lines, sys.stdout)
        else:
            tmp = f"{args.out}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                n = write_lines(lines, f)
            os.replace(tmp, args.out)
    print(f"exported {n} turns{' with vectors' if args.with_vectors else ''}"
          f"{'' if args.out in (None, '-') else f' to {args.out}'}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from .transfer import link_versions, read_lines

    if args.file == "-":
        stream, total = sys.stdin, None
    else:
        stream = open(args.file, encoding="utf-8")  # noqa: SIM115 - closed below
        with open(args.file, encoding="utf-8") as f:
            total = sum(1 for line in f if line.strip())
    stored = skipped = 0
    try:
        with open_target(args) as target:
            existing = target.existing_ids()
            batch: list[dict[str, Any]] = []
            archived: list[int] = []  # positions in the batch
            to_archive: list[str] = []
            versions: list[dict[str, Any]] = []  # stored lines that replaced an older turn

            def flush() -> None:
                nonlocal stored
                if batch:
                    ids = target.add(batch)
                    to_archive.extend(ids[k] for k in archived)
                    stored += len(ids)
                    batch.clear()
                    archived.clear()

            for line in _progress(read_lines(stream), total=total, desc="importing",
                                  enabled=not args.no_progress):
                turn = line["turn"]
                if turn.get("id") in existing:
                    skipped += 1
                    continue
                if line["vector"] is not None and not args.reembed:
                    turn["vector"] = line["vector"]
                if line["archived"]:
                    archived.append(len(batch))
                if line["supersedes"]:
                    versions.append(line)
                batch.append(turn)
                if len(batch) >= args.batch:
                    flush()
            flush()
            link_versions(target, versions)
            if to_archive:
                target.archive(to_archive)
    finally:
        if stream is not sys.stdin:
            stream.close()
    print(f"imported {stored} turns ({skipped} already there, skipped)"
          f"{f'; {len(to_archive)} archived' if to_archive else ''}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------
# serve
# ---------------------------------------------------------------------------------------
def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _serve_guard(args: argparse.Namespace, key: str | None, keys: Any) -> None:
    if not key and keys is None and not _loopback(args.host) and not args.insecure_no_key:
        raise InvalidInputError(
            f"refusing to serve on {args.host} without an API key: pass --api-key (or set "
            f"{ENV_KEY}) or --key-file (or {ENV_KEYS}), bind to 127.0.0.1, or pass --insecure-no-key")


def _key_ring(args: argparse.Namespace) -> Any:
    """The keys bound to namespaces: ``--key-file`` or, without it, ``$SYNAPSE_API_KEYS``
    (the same JSON); None when neither."""
    from .access import KeyRing

    if args.key_file:
        return KeyRing.load(args.key_file)
    inline = os.environ.get(ENV_KEYS, "").strip()
    return KeyRing.parse(inline, source=f"${ENV_KEYS}") if inline else None


def _service(args: argparse.Namespace) -> Any:
    from .service import MemoryService, make_embedder

    kwargs: dict[str, Any] = {}
    if args.chroma:
        from ..storage.chroma import http_client

        host, _, port = args.chroma.rpartition(":")
        if not host or not port.isdigit():
            raise InvalidInputError(f"--chroma must be HOST:PORT, got {args.chroma!r}")
        kwargs["client"] = http_client(host, int(port))
    service = MemoryService(args.path, embedder=make_embedder(args.embedder),
                            max_open=args.max_open, recycle_after=args.recycle_after, **kwargs)
    service.embedder.embed_query("warm up")  # load the model before the first request waits on it
    threads.limit_process()  # requests run on worker threads: numpy's BLAS off the encoder's cores
    return service


def cmd_serve_http(args: argparse.Namespace) -> int:
    from .rest import create_app
    from .serving import run_uvicorn, stop_signals

    key, keys = api_key(args), _key_ring(args)
    _serve_guard(args, key, keys)
    service = _service(args)
    app = create_app(service=service, api_key=key, keys=keys, mcp=args.mcp, host=args.host, ui=args.ui)
    guard = f"; {len(keys.keys) + bool(key)} API keys" if keys is not None else "; API key required" if key else ""
    print(f"SYNAPSE memory server: http://{args.host}:{args.port} (folder {service.path}; "
          f"docs at /docs{'; MCP at /mcp' if args.mcp else ''}{'; explorer at /ui/' if args.ui else ''}{guard})", file=sys.stderr, flush=True)
    json_logs = args.log_format == "json"
    if json_logs:
        from .telemetry import use_json_logs

        use_json_logs()
    with stop_signals() as stopped:
        try:
            run_uvicorn(app, host=args.host, port=args.port, log_level=args.log_level,
                        keep_logging=json_logs)
        finally:
            service.close()  # the final snapshot of every open memory
    if stopped:
        print(f"SYNAPSE memory server stopped ({stopped[0]}); memories saved", file=sys.stderr, flush=True)
    return 0


def cmd_serve_mcp(args: argparse.Namespace) -> int:
    from .mcp import run_mcp

    key, keys = api_key(args), _key_ring(args)
    if args.transport == "http":
        _serve_guard(args, key, keys)
        print(f"SYNAPSE MCP server: http://{args.host}:{args.port}/mcp (folder {args.path})",
              file=sys.stderr, flush=True)
    run_mcp(_service(args), transport=args.transport, host=args.host, port=args.port, api_key=key,
            keys=keys, log_level=args.log_level)
    return 0


# ---------------------------------------------------------------------------------------
# parsers
# ---------------------------------------------------------------------------------------
def _wrap(fn: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except SynapseError as exc:
            print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
    return run


def add_commands(sub: Any) -> None:
    """Add ``serve`` and the operator commands to the ``synapse`` parser's subparsers."""
    where = argparse.ArgumentParser(add_help=False)
    g = where.add_argument_group("where the memory is (one of)")
    g.add_argument("--path", help="a memory folder (opened here; no server may hold it)")
    g.add_argument("--url", help="a memory server, e.g. http://127.0.0.1:8765")
    where.add_argument("--namespace", default="default", help="which memory (default: default)")
    where.add_argument("--api-key", help=f"the server's API key (default: ${ENV_KEY})")
    where.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the server")
    where.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm",
                       help="with --path: the embedder (hashing: model-free, for tests)")
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON")
    progress = argparse.ArgumentParser(add_help=False)
    progress.add_argument("--no-progress", action="store_true", help="no progress bar")

    serve = sub.add_parser("serve", help="serve a memory folder: REST API or MCP server")
    ssub = serve.add_subparsers(dest="serve_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--path", required=True, help="the memory folder this server owns")
    common.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    common.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    common.add_argument("--api-key", help=f"require this key, for every namespace (default: ${ENV_KEY}; none)")
    common.add_argument("--key-file", metavar="FILE",
                        help="JSON of API keys bound to namespace patterns, one per app or tenant: "
                             '{"keys": [{"name": "alice-app", "key": "...", "namespaces": ["alice"]}]} '
                             f"(default: the same JSON in ${ENV_KEYS})")
    common.add_argument("--insecure-no-key", action="store_true",
                        help="allow a non-loopback --host without an API key")
    common.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm",
                        help="minilm (default) or hashing (model-free, for tests)")
    common.add_argument("--chroma", metavar="HOST:PORT",
                        help="keep the vectors in a Chroma server (chroma run) instead of the folder")
    common.add_argument("--max-open", type=int, default=DEFAULT_MAX_OPEN, metavar="N",
                        help=f"namespaces kept open at most (default {DEFAULT_MAX_OPEN}; lowered, "
                             "with a warning, when ulimit -n is too low for that many)")
    common.add_argument("--recycle-after", type=int, default=None, metavar="N",
                        help="restart the embedded Chroma after N engine closes, freeing what "
                             "closed namespaces left loaded (default: --max-open)")
    common.add_argument("--log-level", default="warning",
                        choices=("critical", "error", "warning", "info", "debug"))
    http = ssub.add_parser("http", parents=[common], help="the REST API (FastAPI on uvicorn)")
    http.add_argument("--mcp", action="store_true", help="also serve the MCP tools at /mcp")
    http.add_argument("--ui", action="store_true", help="also serve the explorer page at /ui/")
    http.add_argument("--log-format", choices=("text", "json"), default="text",
                      help="json: every log line one JSON object on stderr, with an access line "
                           "per request (method, route, status, duration_ms)")
    http.set_defaults(func=_wrap(cmd_serve_http))
    mcp = ssub.add_parser("mcp", parents=[common], help="the MCP server (stdio or streamable HTTP)")
    mcp.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    mcp.set_defaults(func=_wrap(cmd_serve_mcp))

    add = sub.add_parser("add", parents=[where], help="store turns")
    add.add_argument("text", nargs="+", help="the text of each turn")
    add.add_argument("--speaker")
    add.add_argument("--timestamp", help="event time (ISO 8601 or epoch seconds)")
    add.add_argument("--metadata", help="JSON object")
    add.add_argument("--id", help="the turn's id (an idempotency key)")
    add.set_defaults(func=_wrap(cmd_add))

    query = sub.add_parser("query", parents=[where, as_json], help="retrieve memories for a query")
    query.add_argument("query")
    query.add_argument("--k", type=int, default=10)
    query.add_argument("--speaker", action="append", help="only turns of this speaker (repeatable)")
    query.add_argument("--since", help="event time >= since")
    query.add_argument("--until", help="event time < until")
    query.add_argument("--where", help='JSON filter on metadata, e.g. \'{"topic": "ski"}\'')
    query.add_argument("--concepts", action="store_true", help="return concept nodes too")
    query.add_argument("--as-of", help="read the memory as it stood then (ISO 8601 or epoch seconds)")
    query.add_argument("--at", help="when the question is asked: its relative dates ('last week') "
                                    "are read against it (default: --as-of, else now)")
    query.add_argument("--current-only", action="store_true", help="leave out replaced versions")
    query.set_defaults(func=_wrap(cmd_query))

    history = sub.add_parser("history", parents=[where, as_json],
                             help="a memory's versions, oldest first, with when each held")
    history.add_argument("id")
    history.set_defaults(func=_wrap(cmd_history))

    inspect = sub.add_parser("inspect", parents=[where, as_json],
                             help="a namespace (folder, stats, config) or one memory")
    inspect.add_argument("id", nargs="?", help="a memory id (default: the namespace)")
    inspect.add_argument("--query", help="how this query ranks the memory")
    inspect.add_argument("--html", metavar="FILE", help="write one self-contained page (the "
                         "positional names the namespace then; --query: its Ask view)")
    inspect.set_defaults(func=_wrap(cmd_inspect))

    for name, fn, text in (("verify", cmd_verify, "check that the stores agree (exit 1 if not)"),
                           ("repair", cmd_repair, "bring the stores back into agreement")):
        p = sub.add_parser(name, parents=[where, as_json], help=text)
        p.set_defaults(func=_wrap(fn))

    forget = sub.add_parser("forget", parents=[where, as_json], help="remove memories for good")
    forget.add_argument("ids", nargs="*", help="memory ids")
    forget.add_argument("--speaker")
    forget.add_argument("--since")
    forget.add_argument("--until")
    forget.add_argument("--where", help="JSON filter on metadata")
    forget.add_argument("--everything", action="store_true", help="every memory of the namespace")
    forget.set_defaults(func=_wrap(cmd_forget))

    export = sub.add_parser("export", parents=[where, progress], help="write the turns as JSONL")
    export.add_argument("--out", help="file (default: stdout)")
    export.add_argument("--with-vectors", action="store_true", help="include each turn's embedding")
    export.set_defaults(func=_wrap(cmd_export))

    imp = sub.add_parser("import", parents=[where, progress], help="store the turns of a JSONL export")
    imp.add_argument("file", help="JSONL file ('-': stdin)")
    imp.add_argument("--batch", type=int, default=256, help="turns per request (default 256)")
    imp.add_argument("--reembed", action="store_true", help="ignore the vectors in the file")
    imp.set_defaults(func=_wrap(cmd_import))

    from .shard_commands import add_shard_commands

    add_shard_commands(sub, _wrap)
