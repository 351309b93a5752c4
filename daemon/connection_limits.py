"""Bounds on the HTTP/2 connections of dynod's gRPC servers (the Dyno TCP port and the Agent Unix socket, which
takes the connection, stream, idle and handshake bounds only: agent_server_options).

Without them, grpc's defaults let any client that reaches the port hold connections for ever, each with as many
concurrent streams as it likes, and a peer that vanished without closing its socket (a crashed host, a cut link)
kept its connection, and any stream on it, for hours (TCP notices nothing while the server does not write).
The semantics are grpc's (gRFC A8 client/server keepalive, A9 server-side connection management):

- `grpc.max_allowed_incoming_connections`: past it a new connection is closed at once (the client sees
  UNAVAILABLE and retries); the idle limit below frees the places of clients that stopped calling.
- `grpc.max_concurrent_streams`: streams open at once on one connection (HTTP/2 SETTINGS); a client's extra calls
  wait in its own queue, so one connection cannot take all of the server's `maximum_concurrent_rpcs`. Above what
  dyno-cli opens on one channel (8 fetches + polls) and the sum of the stream caps (stream_slots.py).
- `grpc.max_connection_idle_ms`: a connection without any RPC for this long gets GOAWAY (a client reconnects by
  itself on its next call). A live stream is not idle, so `metrics --watch` and fetches never meet it.
- `grpc.max_connection_age_ms` (+-10% jitter by grpc) with `grpc.max_connection_age_grace_ms`: an old connection
  gets GOAWAY, so no new RPC starts on it, but the grace is unbounded (grpc's "infinite", INT_MAX): RPCs in flight
  run to their end. A `--watch` view lasts as long as its user wants and a fetch as long as its file takes; they
  are bounded by their own caps (stream_slots.py), and a dead peer by the keepalive pings below, not by age.
- `grpc.keepalive_time_ms` / `grpc.keepalive_timeout_ms` (and `grpc.http2.ping_timeout_ms`, which newer grpc
  uses for the ack wait): the server pings each connection with calls in flight every KEEPALIVE_TIME_MS and closes
  it when no ack comes within KEEPALIVE_TIMEOUT_MS, ending its streams (and releasing their threads and slots).
  `grpc.http2.max_pings_without_data` 0 lets it keep pinging a stream that sends nothing (a fetch stalled by flow
  control), which grpc otherwise stops after 2 pings.
- `grpc.server_handshake_timeout_ms`: a connection that never completes its HTTP/2 (or TLS) handshake is closed
  after this, instead of holding a place for grpc's default 120 s.
- `grpc.max_receive_message_length`: the largest request message (MAX_REQUEST_BYTES); a larger one is refused with
  RESOURCE_EXHAUSTED. grpc's default, 4 MiB, let any client that reaches the port (the read-only RPCs need no token)
  make dynod hold 4 MiB per call in flight and parse it: 64 clients sending 3 MB requests took dynod to 620 MB
  (the unit's MemoryMax is 512M). dynod's largest valid requests are ~52 KB (GetMetrics: 256 name patterns of 200
  characters) and ~5 KB (StartTrace: 1024 pids; an agent's Register: a 4 KiB command line).
"""

from __future__ import annotations

__all__ = [
    "MAX_CONNECTIONS",
    "MAX_CONCURRENT_STREAMS",
    "MAX_CONNECTION_IDLE_MS",
    "MAX_CONNECTION_AGE_MS",
    "MAX_CONNECTION_AGE_GRACE_MS",
    "KEEPALIVE_TIME_MS",
    "KEEPALIVE_TIMEOUT_MS",
    "HANDSHAKE_TIMEOUT_MS",
    "MAX_REQUEST_BYTES",
    "server_options",
    "agent_server_options",
]

MAX_CONNECTIONS = 1024
MAX_CONCURRENT_STREAMS = 64
MAX_CONNECTION_IDLE_MS = 5 * 60 * 1000
MAX_CONNECTION_AGE_MS = 60 * 60 * 1000
MAX_CONNECTION_AGE_GRACE_MS = 2**31 - 1  # grpc's INT_MAX: no forced close of RPCs in flight
KEEPALIVE_TIME_MS = 60 * 1000
KEEPALIVE_TIMEOUT_MS = 20 * 1000
HANDSHAKE_TIMEOUT_MS = 10 * 1000
MAX_REQUEST_BYTES = 256 * 1024  # ~5x the largest valid request


def server_options(*, age_limit: bool = True, keepalive: bool = True) -> list[tuple[str, int]]:
    """grpc server options (for `grpc.server(options=...)`) with the bounds above, read when called. `age_limit` /
    `keepalive` False: grpc's defaults for those (no age limit; a ping after 2 idle hours)."""
    options = [
        ("grpc.max_allowed_incoming_connections", MAX_CONNECTIONS),
        ("grpc.max_concurrent_streams", MAX_CONCURRENT_STREAMS),
        ("grpc.max_connection_idle_ms", MAX_CONNECTION_IDLE_MS),
        ("grpc.server_handshake_timeout_ms", HANDSHAKE_TIMEOUT_MS),
        ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
    ]
    if age_limit:
        options += [
            ("grpc.max_connection_age_ms", MAX_CONNECTION_AGE_MS),
            ("grpc.max_connection_age_grace_ms", MAX_CONNECTION_AGE_GRACE_MS),
        ]
    if keepalive:
        options += [
            ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
            ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
            # grpc >= 1.5x waits for a ping's ack for this long (default 1 min), whatever keepalive_timeout says
            ("grpc.http2.ping_timeout_ms", KEEPALIVE_TIMEOUT_MS),
            ("grpc.http2.max_pings_without_data", 0),
        ]
    return options


def agent_server_options() -> list[tuple[str, int]]:
    """The Agent Unix socket's: no age limit and no keepalive pings. Each trainer holds one connection with its Watch
    stream for its whole life (never idle), a process that dies closes its socket in the kernel, and a GOAWAY for age
    makes grpc print an INFO line ("Got goaway") into the trainer's stderr; a trainer stopped in a debugger would
    miss the pings and lose its registration."""
    return server_options(age_limit=False, keepalive=False)
