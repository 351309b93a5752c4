from dyno.v1 import dyno_pb2 as _dyno_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RegisterRequest(_message.Message):
    __slots__ = ("pid", "ancestry", "job_id", "rank", "local_rank", "world_size", "gpu", "hostname", "cmdline", "agent_version", "pid_namespace", "reports_with_session")
    PID_FIELD_NUMBER: _ClassVar[int]
    ANCESTRY_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    LOCAL_RANK_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    CMDLINE_FIELD_NUMBER: _ClassVar[int]
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    PID_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    REPORTS_WITH_SESSION_FIELD_NUMBER: _ClassVar[int]
    pid: int
    ancestry: _containers.RepeatedScalarFieldContainer[int]
    job_id: str
    rank: int
    local_rank: int
    world_size: int
    gpu: int
    hostname: str
    cmdline: str
    agent_version: str
    pid_namespace: str
    reports_with_session: bool
    def __init__(self, pid: _Optional[int] = ..., ancestry: _Optional[_Iterable[int]] = ..., job_id: _Optional[str] = ..., rank: _Optional[int] = ..., local_rank: _Optional[int] = ..., world_size: _Optional[int] = ..., gpu: _Optional[int] = ..., hostname: _Optional[str] = ..., cmdline: _Optional[str] = ..., agent_version: _Optional[str] = ..., pid_namespace: _Optional[str] = ..., reports_with_session: _Optional[bool] = ...) -> None: ...

class RegisterResponse(_message.Message):
    __slots__ = ("session_id", "keepalive_ms", "daemon_version")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    KEEPALIVE_MS_FIELD_NUMBER: _ClassVar[int]
    DAEMON_VERSION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    keepalive_ms: int
    daemon_version: str
    def __init__(self, session_id: _Optional[str] = ..., keepalive_ms: _Optional[int] = ..., daemon_version: _Optional[str] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("pid", "session_id")
    PID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    pid: int
    session_id: str
    def __init__(self, pid: _Optional[int] = ..., session_id: _Optional[str] = ...) -> None: ...

class TraceConfig(_message.Message):
    __slots__ = ("trace_id", "duration_ms", "iterations", "start_time_ms", "start_iteration_roundup", "record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules", "output_path", "deadline_ms")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    START_ITERATION_ROUNDUP_FIELD_NUMBER: _ClassVar[int]
    RECORD_SHAPES_FIELD_NUMBER: _ClassVar[int]
    PROFILE_MEMORY_FIELD_NUMBER: _ClassVar[int]
    WITH_STACK_FIELD_NUMBER: _ClassVar[int]
    WITH_FLOPS_FIELD_NUMBER: _ClassVar[int]
    WITH_MODULES_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PATH_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    duration_ms: int
    iterations: int
    start_time_ms: int
    start_iteration_roundup: int
    record_shapes: bool
    profile_memory: bool
    with_stack: bool
    with_flops: bool
    with_modules: bool
    output_path: str
    deadline_ms: int
    def __init__(self, trace_id: _Optional[str] = ..., duration_ms: _Optional[int] = ..., iterations: _Optional[int] = ..., start_time_ms: _Optional[int] = ..., start_iteration_roundup: _Optional[int] = ..., record_shapes: _Optional[bool] = ..., profile_memory: _Optional[bool] = ..., with_stack: _Optional[bool] = ..., with_flops: _Optional[bool] = ..., with_modules: _Optional[bool] = ..., output_path: _Optional[str] = ..., deadline_ms: _Optional[int] = ...) -> None: ...

class AgentCommand(_message.Message):
    __slots__ = ("trace", "keepalive", "cancel_trace_id")
    TRACE_FIELD_NUMBER: _ClassVar[int]
    KEEPALIVE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    trace: TraceConfig
    keepalive: bool
    cancel_trace_id: str
    def __init__(self, trace: _Optional[_Union[TraceConfig, _Mapping]] = ..., keepalive: _Optional[bool] = ..., cancel_trace_id: _Optional[str] = ...) -> None: ...

class ReportTraceRequest(_message.Message):
    __slots__ = ("pid", "trace_id", "state", "path", "size_bytes", "error", "session_id")
    PID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    pid: int
    trace_id: str
    state: _dyno_pb2.TraceState
    path: str
    size_bytes: int
    error: str
    session_id: str
    def __init__(self, pid: _Optional[int] = ..., trace_id: _Optional[str] = ..., state: _Optional[_Union[_dyno_pb2.TraceState, str]] = ..., path: _Optional[str] = ..., size_bytes: _Optional[int] = ..., error: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class ReportTraceResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
