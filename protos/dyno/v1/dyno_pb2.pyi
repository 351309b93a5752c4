from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Protocol(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTOCOL_UNSPECIFIED: _ClassVar[Protocol]
    PROTOCOL_AGENT: _ClassVar[Protocol]
    PROTOCOL_KINETO: _ClassVar[Protocol]

class ProcessRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROCESS_ROLE_UNSPECIFIED: _ClassVar[ProcessRole]
    PROCESS_ROLE_TRAINER: _ClassVar[ProcessRole]
    PROCESS_ROLE_LAUNCHER: _ClassVar[ProcessRole]
    PROCESS_ROLE_DATALOADER: _ClassVar[ProcessRole]

class TraceState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRACE_STATE_UNSPECIFIED: _ClassVar[TraceState]
    TRACE_STATE_PENDING: _ClassVar[TraceState]
    TRACE_STATE_DELIVERED: _ClassVar[TraceState]
    TRACE_STATE_RUNNING: _ClassVar[TraceState]
    TRACE_STATE_DONE: _ClassVar[TraceState]
    TRACE_STATE_FAILED: _ClassVar[TraceState]
    TRACE_STATE_TIMED_OUT: _ClassVar[TraceState]
    TRACE_STATE_CANCELLED: _ClassVar[TraceState]

class TraceReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRACE_REASON_UNSPECIFIED: _ClassVar[TraceReason]
    TRACE_REASON_GONE_BEFORE_PICKUP: _ClassVar[TraceReason]
    TRACE_REASON_GONE_MID_TRACE: _ClassVar[TraceReason]
    TRACE_REASON_DISCONNECTED_MID_TRACE: _ClassVar[TraceReason]
    TRACE_REASON_NOT_PICKED_UP: _ClassVar[TraceReason]
    TRACE_REASON_DEADLINE_PASSED: _ClassVar[TraceReason]
    TRACE_REASON_CANCELLED_BY_REQUEST: _ClassVar[TraceReason]
    TRACE_REASON_AGENT_FAILED: _ClassVar[TraceReason]
    TRACE_REASON_FILE_NOT_BELIEVED: _ClassVar[TraceReason]
    TRACE_REASON_PROFILER_BUSY: _ClassVar[TraceReason]
    TRACE_REASON_DAEMON_RESTARTED: _ClassVar[TraceReason]
    TRACE_REASON_DONE_AFTER_RECONNECT: _ClassVar[TraceReason]
    TRACE_REASON_DONE_AFTER_RESTART: _ClassVar[TraceReason]
    TRACE_REASON_DONE_AT_DISCONNECT: _ClassVar[TraceReason]
    TRACE_REASON_PREEMPTED_BY_ON_DEMAND: _ClassVar[TraceReason]

class AnalysisState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ANALYSIS_STATE_UNSPECIFIED: _ClassVar[AnalysisState]
    ANALYSIS_STATE_PENDING: _ClassVar[AnalysisState]
    ANALYSIS_STATE_RUNNING: _ClassVar[AnalysisState]
    ANALYSIS_STATE_DONE: _ClassVar[AnalysisState]
    ANALYSIS_STATE_FAILED: _ClassVar[AnalysisState]
    ANALYSIS_STATE_DISABLED: _ClassVar[AnalysisState]

class AnalysisFailure(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ANALYSIS_FAILURE_UNSPECIFIED: _ClassVar[AnalysisFailure]
    ANALYSIS_FAILURE_NO_TRACE: _ClassVar[AnalysisFailure]
    ANALYSIS_FAILURE_CRASHED: _ClassVar[AnalysisFailure]
    ANALYSIS_FAILURE_TIMED_OUT: _ClassVar[AnalysisFailure]
    ANALYSIS_FAILURE_OUT_OF_MEMORY: _ClassVar[AnalysisFailure]
    ANALYSIS_FAILURE_BAD_OUTPUT: _ClassVar[AnalysisFailure]
    ANALYSIS_FAILURE_TRACE_FAILED: _ClassVar[AnalysisFailure]
PROTOCOL_UNSPECIFIED: Protocol
PROTOCOL_AGENT: Protocol
PROTOCOL_KINETO: Protocol
PROCESS_ROLE_UNSPECIFIED: ProcessRole
PROCESS_ROLE_TRAINER: ProcessRole
PROCESS_ROLE_LAUNCHER: ProcessRole
PROCESS_ROLE_DATALOADER: ProcessRole
TRACE_STATE_UNSPECIFIED: TraceState
TRACE_STATE_PENDING: TraceState
TRACE_STATE_DELIVERED: TraceState
TRACE_STATE_RUNNING: TraceState
TRACE_STATE_DONE: TraceState
TRACE_STATE_FAILED: TraceState
TRACE_STATE_TIMED_OUT: TraceState
TRACE_STATE_CANCELLED: TraceState
TRACE_REASON_UNSPECIFIED: TraceReason
TRACE_REASON_GONE_BEFORE_PICKUP: TraceReason
TRACE_REASON_GONE_MID_TRACE: TraceReason
TRACE_REASON_DISCONNECTED_MID_TRACE: TraceReason
TRACE_REASON_NOT_PICKED_UP: TraceReason
TRACE_REASON_DEADLINE_PASSED: TraceReason
TRACE_REASON_CANCELLED_BY_REQUEST: TraceReason
TRACE_REASON_AGENT_FAILED: TraceReason
TRACE_REASON_FILE_NOT_BELIEVED: TraceReason
TRACE_REASON_PROFILER_BUSY: TraceReason
TRACE_REASON_DAEMON_RESTARTED: TraceReason
TRACE_REASON_DONE_AFTER_RECONNECT: TraceReason
TRACE_REASON_DONE_AFTER_RESTART: TraceReason
TRACE_REASON_DONE_AT_DISCONNECT: TraceReason
TRACE_REASON_PREEMPTED_BY_ON_DEMAND: TraceReason
ANALYSIS_STATE_UNSPECIFIED: AnalysisState
ANALYSIS_STATE_PENDING: AnalysisState
ANALYSIS_STATE_RUNNING: AnalysisState
ANALYSIS_STATE_DONE: AnalysisState
ANALYSIS_STATE_FAILED: AnalysisState
ANALYSIS_STATE_DISABLED: AnalysisState
ANALYSIS_FAILURE_UNSPECIFIED: AnalysisFailure
ANALYSIS_FAILURE_NO_TRACE: AnalysisFailure
ANALYSIS_FAILURE_CRASHED: AnalysisFailure
ANALYSIS_FAILURE_TIMED_OUT: AnalysisFailure
ANALYSIS_FAILURE_OUT_OF_MEMORY: AnalysisFailure
ANALYSIS_FAILURE_BAD_OUTPUT: AnalysisFailure
ANALYSIS_FAILURE_TRACE_FAILED: AnalysisFailure

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SamplerState(_message.Message):
    __slots__ = ("name", "ok", "reason", "simulated", "backend")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SIMULATED_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    name: str
    ok: bool
    reason: str
    simulated: bool
    backend: str
    def __init__(self, name: _Optional[str] = ..., ok: _Optional[bool] = ..., reason: _Optional[str] = ..., simulated: _Optional[bool] = ..., backend: _Optional[str] = ...) -> None: ...

class GpuInfo(_message.Message):
    __slots__ = ("index", "name", "uuid", "memory_total_bytes", "simulated", "pci_bus_id")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    SIMULATED_FIELD_NUMBER: _ClassVar[int]
    PCI_BUS_ID_FIELD_NUMBER: _ClassVar[int]
    index: int
    name: str
    uuid: str
    memory_total_bytes: int
    simulated: bool
    pci_bus_id: str
    def __init__(self, index: _Optional[int] = ..., name: _Optional[str] = ..., uuid: _Optional[str] = ..., memory_total_bytes: _Optional[int] = ..., simulated: _Optional[bool] = ..., pci_bus_id: _Optional[str] = ...) -> None: ...

class Status(_message.Message):
    __slots__ = ("hostname", "version", "uptime_s", "samplers", "gpus", "registered_processes", "trace_dir", "trace_dir_bytes", "interval_s", "history_s", "samples_in_history", "pid", "agent_socket", "kineto_endpoint", "active_traces", "instance_id", "job_store", "periodic_profiling")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    SAMPLERS_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_PROCESSES_FIELD_NUMBER: _ClassVar[int]
    TRACE_DIR_FIELD_NUMBER: _ClassVar[int]
    TRACE_DIR_BYTES_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    HISTORY_S_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_IN_HISTORY_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    AGENT_SOCKET_FIELD_NUMBER: _ClassVar[int]
    KINETO_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_TRACES_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_STORE_FIELD_NUMBER: _ClassVar[int]
    PERIODIC_PROFILING_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    version: str
    uptime_s: float
    samplers: _containers.RepeatedCompositeFieldContainer[SamplerState]
    gpus: _containers.RepeatedCompositeFieldContainer[GpuInfo]
    registered_processes: int
    trace_dir: str
    trace_dir_bytes: int
    interval_s: float
    history_s: float
    samples_in_history: int
    pid: int
    agent_socket: str
    kineto_endpoint: str
    active_traces: int
    instance_id: str
    job_store: str
    periodic_profiling: str
    def __init__(self, hostname: _Optional[str] = ..., version: _Optional[str] = ..., uptime_s: _Optional[float] = ..., samplers: _Optional[_Iterable[_Union[SamplerState, _Mapping]]] = ..., gpus: _Optional[_Iterable[_Union[GpuInfo, _Mapping]]] = ..., registered_processes: _Optional[int] = ..., trace_dir: _Optional[str] = ..., trace_dir_bytes: _Optional[int] = ..., interval_s: _Optional[float] = ..., history_s: _Optional[float] = ..., samples_in_history: _Optional[int] = ..., pid: _Optional[int] = ..., agent_socket: _Optional[str] = ..., kineto_endpoint: _Optional[str] = ..., active_traces: _Optional[int] = ..., instance_id: _Optional[str] = ..., job_store: _Optional[str] = ..., periodic_profiling: _Optional[str] = ...) -> None: ...

class GetVersionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VersionInfo(_message.Message):
    __slots__ = ("version", "api", "python", "grpc")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    API_FIELD_NUMBER: _ClassVar[int]
    PYTHON_FIELD_NUMBER: _ClassVar[int]
    GRPC_FIELD_NUMBER: _ClassVar[int]
    version: str
    api: str
    python: str
    grpc: str
    def __init__(self, version: _Optional[str] = ..., api: _Optional[str] = ..., python: _Optional[str] = ..., grpc: _Optional[str] = ...) -> None: ...

class Metric(_message.Message):
    __slots__ = ("name", "labels", "value")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    labels: _containers.ScalarMap[str, str]
    value: float
    def __init__(self, name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., value: _Optional[float] = ...) -> None: ...

class Sample(_message.Message):
    __slots__ = ("timestamp_ms", "metrics")
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    timestamp_ms: int
    metrics: _containers.RepeatedCompositeFieldContainer[Metric]
    def __init__(self, timestamp_ms: _Optional[int] = ..., metrics: _Optional[_Iterable[_Union[Metric, _Mapping]]] = ...) -> None: ...

class GetMetricsRequest(_message.Message):
    __slots__ = ("names", "since_ms", "limit", "page_token", "whole_history")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    WHOLE_HISTORY_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    since_ms: int
    limit: int
    page_token: str
    whole_history: bool
    def __init__(self, names: _Optional[_Iterable[str]] = ..., since_ms: _Optional[int] = ..., limit: _Optional[int] = ..., page_token: _Optional[str] = ..., whole_history: _Optional[bool] = ...) -> None: ...

class GetMetricsResponse(_message.Message):
    __slots__ = ("samples", "hostname", "next_page_token")
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    samples: _containers.RepeatedCompositeFieldContainer[Sample]
    hostname: str
    next_page_token: str
    def __init__(self, samples: _Optional[_Iterable[_Union[Sample, _Mapping]]] = ..., hostname: _Optional[str] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class StreamMetricsRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class ProcessInfo(_message.Message):
    __slots__ = ("pid", "ancestry", "job_id", "rank", "local_rank", "world_size", "gpu", "protocol", "registered_ms", "last_seen_ms", "busy", "current_trace_id", "cmdline", "hostname", "role")
    PID_FIELD_NUMBER: _ClassVar[int]
    ANCESTRY_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    LOCAL_RANK_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_MS_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    CMDLINE_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    pid: int
    ancestry: _containers.RepeatedScalarFieldContainer[int]
    job_id: str
    rank: int
    local_rank: int
    world_size: int
    gpu: int
    protocol: Protocol
    registered_ms: int
    last_seen_ms: int
    busy: bool
    current_trace_id: str
    cmdline: str
    hostname: str
    role: ProcessRole
    def __init__(self, pid: _Optional[int] = ..., ancestry: _Optional[_Iterable[int]] = ..., job_id: _Optional[str] = ..., rank: _Optional[int] = ..., local_rank: _Optional[int] = ..., world_size: _Optional[int] = ..., gpu: _Optional[int] = ..., protocol: _Optional[_Union[Protocol, str]] = ..., registered_ms: _Optional[int] = ..., last_seen_ms: _Optional[int] = ..., busy: _Optional[bool] = ..., current_trace_id: _Optional[str] = ..., cmdline: _Optional[str] = ..., hostname: _Optional[str] = ..., role: _Optional[_Union[ProcessRole, str]] = ...) -> None: ...

class ListProcessesRequest(_message.Message):
    __slots__ = ("job_id", "page_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    page_token: str
    def __init__(self, job_id: _Optional[str] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListProcessesResponse(_message.Message):
    __slots__ = ("processes", "hostname", "next_page_token")
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    processes: _containers.RepeatedCompositeFieldContainer[ProcessInfo]
    hostname: str
    next_page_token: str
    def __init__(self, processes: _Optional[_Iterable[_Union[ProcessInfo, _Mapping]]] = ..., hostname: _Optional[str] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class TraceRequest(_message.Message):
    __slots__ = ("job_id", "pids", "process_limit", "duration_ms", "iterations", "start_time_ms", "start_iteration_roundup", "record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules", "trace_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_LIMIT_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    START_ITERATION_ROUNDUP_FIELD_NUMBER: _ClassVar[int]
    RECORD_SHAPES_FIELD_NUMBER: _ClassVar[int]
    PROFILE_MEMORY_FIELD_NUMBER: _ClassVar[int]
    WITH_STACK_FIELD_NUMBER: _ClassVar[int]
    WITH_FLOPS_FIELD_NUMBER: _ClassVar[int]
    WITH_MODULES_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    pids: _containers.RepeatedScalarFieldContainer[int]
    process_limit: int
    duration_ms: int
    iterations: int
    start_time_ms: int
    start_iteration_roundup: int
    record_shapes: bool
    profile_memory: bool
    with_stack: bool
    with_flops: bool
    with_modules: bool
    trace_id: str
    def __init__(self, job_id: _Optional[str] = ..., pids: _Optional[_Iterable[int]] = ..., process_limit: _Optional[int] = ..., duration_ms: _Optional[int] = ..., iterations: _Optional[int] = ..., start_time_ms: _Optional[int] = ..., start_iteration_roundup: _Optional[int] = ..., record_shapes: _Optional[bool] = ..., profile_memory: _Optional[bool] = ..., with_stack: _Optional[bool] = ..., with_flops: _Optional[bool] = ..., with_modules: _Optional[bool] = ..., trace_id: _Optional[str] = ...) -> None: ...

class ProcessTrace(_message.Message):
    __slots__ = ("pid", "job_id", "rank", "protocol", "state", "path", "size_bytes", "error", "updated_ms", "waiting", "reason")
    PID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    UPDATED_MS_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    pid: int
    job_id: str
    rank: int
    protocol: Protocol
    state: TraceState
    path: str
    size_bytes: int
    error: str
    updated_ms: int
    waiting: str
    reason: TraceReason
    def __init__(self, pid: _Optional[int] = ..., job_id: _Optional[str] = ..., rank: _Optional[int] = ..., protocol: _Optional[_Union[Protocol, str]] = ..., state: _Optional[_Union[TraceState, str]] = ..., path: _Optional[str] = ..., size_bytes: _Optional[int] = ..., error: _Optional[str] = ..., updated_ms: _Optional[int] = ..., waiting: _Optional[str] = ..., reason: _Optional[_Union[TraceReason, str]] = ...) -> None: ...

class StartTraceResponse(_message.Message):
    __slots__ = ("trace_id", "matched_pids", "triggered", "busy_pids", "message", "registered_jobs", "hostname", "instance_id", "next_page_token")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    MATCHED_PIDS_FIELD_NUMBER: _ClassVar[int]
    TRIGGERED_FIELD_NUMBER: _ClassVar[int]
    BUSY_PIDS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_JOBS_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    matched_pids: _containers.RepeatedScalarFieldContainer[int]
    triggered: _containers.RepeatedCompositeFieldContainer[ProcessTrace]
    busy_pids: _containers.RepeatedScalarFieldContainer[int]
    message: str
    registered_jobs: _containers.RepeatedScalarFieldContainer[str]
    hostname: str
    instance_id: str
    next_page_token: str
    def __init__(self, trace_id: _Optional[str] = ..., matched_pids: _Optional[_Iterable[int]] = ..., triggered: _Optional[_Iterable[_Union[ProcessTrace, _Mapping]]] = ..., busy_pids: _Optional[_Iterable[int]] = ..., message: _Optional[str] = ..., registered_jobs: _Optional[_Iterable[str]] = ..., hostname: _Optional[str] = ..., instance_id: _Optional[str] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetTraceRequest(_message.Message):
    __slots__ = ("trace_id", "page_token")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    page_token: str
    def __init__(self, trace_id: _Optional[str] = ..., page_token: _Optional[str] = ...) -> None: ...

class CancelTraceRequest(_message.Message):
    __slots__ = ("trace_id",)
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    def __init__(self, trace_id: _Optional[str] = ...) -> None: ...

class TraceStatus(_message.Message):
    __slots__ = ("trace_id", "request", "processes", "finished", "created_ms", "hostname", "instance_id", "next_page_token")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    request: TraceRequest
    processes: _containers.RepeatedCompositeFieldContainer[ProcessTrace]
    finished: bool
    created_ms: int
    hostname: str
    instance_id: str
    next_page_token: str
    def __init__(self, trace_id: _Optional[str] = ..., request: _Optional[_Union[TraceRequest, _Mapping]] = ..., processes: _Optional[_Iterable[_Union[ProcessTrace, _Mapping]]] = ..., finished: _Optional[bool] = ..., created_ms: _Optional[int] = ..., hostname: _Optional[str] = ..., instance_id: _Optional[str] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class FetchTraceFileRequest(_message.Message):
    __slots__ = ("trace_id", "pid", "chunk_size")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    pid: int
    chunk_size: int
    def __init__(self, trace_id: _Optional[str] = ..., pid: _Optional[int] = ..., chunk_size: _Optional[int] = ...) -> None: ...

class FileChunk(_message.Message):
    __slots__ = ("data", "offset", "last", "total_size", "filename", "checksum")
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    offset: int
    last: bool
    total_size: int
    filename: str
    checksum: str
    def __init__(self, data: _Optional[bytes] = ..., offset: _Optional[int] = ..., last: _Optional[bool] = ..., total_size: _Optional[int] = ..., filename: _Optional[str] = ..., checksum: _Optional[str] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("since_ms", "until_ms", "job_id", "user", "running_only", "page_size", "page_token", "columnar", "analysis_rules")
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    RUNNING_ONLY_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    COLUMNAR_FIELD_NUMBER: _ClassVar[int]
    ANALYSIS_RULES_FIELD_NUMBER: _ClassVar[int]
    since_ms: int
    until_ms: int
    job_id: str
    user: str
    running_only: bool
    page_size: int
    page_token: str
    columnar: bool
    analysis_rules: bool
    def __init__(self, since_ms: _Optional[int] = ..., until_ms: _Optional[int] = ..., job_id: _Optional[str] = ..., user: _Optional[str] = ..., running_only: _Optional[bool] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., columnar: _Optional[bool] = ..., analysis_rules: _Optional[bool] = ...) -> None: ...

class JobRecord(_message.Message):
    __slots__ = ("job_id", "user", "hostname", "first_seen_ms", "last_seen_ms", "running", "gpus_held", "gpus_max", "gpu_indices", "gpu_seconds", "busy_gpu_seconds", "sm_active_gpu_seconds", "tensor_active_gpu_seconds", "gpm_gpu_seconds", "gpu_memory_max_bytes", "energy_joules", "cpu_seconds", "ranks", "pids", "pid_count", "traces", "source", "simulated", "record_id", "latest_analysis")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEEN_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_MS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    GPUS_HELD_FIELD_NUMBER: _ClassVar[int]
    GPUS_MAX_FIELD_NUMBER: _ClassVar[int]
    GPU_INDICES_FIELD_NUMBER: _ClassVar[int]
    GPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BUSY_GPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SM_ACTIVE_GPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TENSOR_ACTIVE_GPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    GPM_GPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    ENERGY_JOULES_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RANKS_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    PID_COUNT_FIELD_NUMBER: _ClassVar[int]
    TRACES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SIMULATED_FIELD_NUMBER: _ClassVar[int]
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    LATEST_ANALYSIS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    user: str
    hostname: str
    first_seen_ms: int
    last_seen_ms: int
    running: bool
    gpus_held: int
    gpus_max: int
    gpu_indices: _containers.RepeatedScalarFieldContainer[int]
    gpu_seconds: float
    busy_gpu_seconds: float
    sm_active_gpu_seconds: float
    tensor_active_gpu_seconds: float
    gpm_gpu_seconds: float
    gpu_memory_max_bytes: int
    energy_joules: float
    cpu_seconds: float
    ranks: _containers.RepeatedScalarFieldContainer[int]
    pids: _containers.RepeatedScalarFieldContainer[int]
    pid_count: int
    traces: int
    source: str
    simulated: bool
    record_id: int
    latest_analysis: TraceSummary
    def __init__(self, job_id: _Optional[str] = ..., user: _Optional[str] = ..., hostname: _Optional[str] = ..., first_seen_ms: _Optional[int] = ..., last_seen_ms: _Optional[int] = ..., running: _Optional[bool] = ..., gpus_held: _Optional[int] = ..., gpus_max: _Optional[int] = ..., gpu_indices: _Optional[_Iterable[int]] = ..., gpu_seconds: _Optional[float] = ..., busy_gpu_seconds: _Optional[float] = ..., sm_active_gpu_seconds: _Optional[float] = ..., tensor_active_gpu_seconds: _Optional[float] = ..., gpm_gpu_seconds: _Optional[float] = ..., gpu_memory_max_bytes: _Optional[int] = ..., energy_joules: _Optional[float] = ..., cpu_seconds: _Optional[float] = ..., ranks: _Optional[_Iterable[int]] = ..., pids: _Optional[_Iterable[int]] = ..., pid_count: _Optional[int] = ..., traces: _Optional[int] = ..., source: _Optional[str] = ..., simulated: _Optional[bool] = ..., record_id: _Optional[int] = ..., latest_analysis: _Optional[_Union[TraceSummary, _Mapping]] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("hostname", "jobs", "next_page_token", "store_problem", "columns")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STORE_PROBLEM_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    jobs: _containers.RepeatedCompositeFieldContainer[JobRecord]
    next_page_token: str
    store_problem: str
    columns: JobColumns
    def __init__(self, hostname: _Optional[str] = ..., jobs: _Optional[_Iterable[_Union[JobRecord, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., store_problem: _Optional[str] = ..., columns: _Optional[_Union[JobColumns, _Mapping]] = ...) -> None: ...

class JobColumns(_message.Message):
    __slots__ = ("job_id", "users", "user_index", "hostnames", "hostname_index", "first_seen_ms", "last_seen_ms", "running", "gpus_max", "gpu_seconds", "busy_gpu_seconds", "traces", "simulated", "gpm_rows", "sm_active_gpu_seconds", "gpm_gpu_seconds", "analysed_rows", "analyzed_ms", "analysis_state", "analysis_failure", "top_rule", "top_rule_share", "rules", "analyses", "analysis_trace_finished_ms")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    USER_INDEX_FIELD_NUMBER: _ClassVar[int]
    HOSTNAMES_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_INDEX_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEEN_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_MS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    GPUS_MAX_FIELD_NUMBER: _ClassVar[int]
    GPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BUSY_GPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TRACES_FIELD_NUMBER: _ClassVar[int]
    SIMULATED_FIELD_NUMBER: _ClassVar[int]
    GPM_ROWS_FIELD_NUMBER: _ClassVar[int]
    SM_ACTIVE_GPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    GPM_GPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ANALYSED_ROWS_FIELD_NUMBER: _ClassVar[int]
    ANALYZED_MS_FIELD_NUMBER: _ClassVar[int]
    ANALYSIS_STATE_FIELD_NUMBER: _ClassVar[int]
    ANALYSIS_FAILURE_FIELD_NUMBER: _ClassVar[int]
    TOP_RULE_FIELD_NUMBER: _ClassVar[int]
    TOP_RULE_SHARE_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    ANALYSES_FIELD_NUMBER: _ClassVar[int]
    ANALYSIS_TRACE_FINISHED_MS_FIELD_NUMBER: _ClassVar[int]
    job_id: _containers.RepeatedScalarFieldContainer[str]
    users: _containers.RepeatedScalarFieldContainer[str]
    user_index: _containers.RepeatedScalarFieldContainer[int]
    hostnames: _containers.RepeatedScalarFieldContainer[str]
    hostname_index: _containers.RepeatedScalarFieldContainer[int]
    first_seen_ms: _containers.RepeatedScalarFieldContainer[int]
    last_seen_ms: _containers.RepeatedScalarFieldContainer[int]
    running: _containers.RepeatedScalarFieldContainer[bool]
    gpus_max: _containers.RepeatedScalarFieldContainer[int]
    gpu_seconds: _containers.RepeatedScalarFieldContainer[float]
    busy_gpu_seconds: _containers.RepeatedScalarFieldContainer[float]
    traces: _containers.RepeatedScalarFieldContainer[int]
    simulated: _containers.RepeatedScalarFieldContainer[bool]
    gpm_rows: _containers.RepeatedScalarFieldContainer[int]
    sm_active_gpu_seconds: _containers.RepeatedScalarFieldContainer[float]
    gpm_gpu_seconds: _containers.RepeatedScalarFieldContainer[float]
    analysed_rows: _containers.RepeatedScalarFieldContainer[int]
    analyzed_ms: _containers.RepeatedScalarFieldContainer[int]
    analysis_state: _containers.RepeatedScalarFieldContainer[AnalysisState]
    analysis_failure: _containers.RepeatedScalarFieldContainer[AnalysisFailure]
    top_rule: _containers.RepeatedScalarFieldContainer[int]
    top_rule_share: _containers.RepeatedScalarFieldContainer[float]
    rules: _containers.RepeatedScalarFieldContainer[str]
    analyses: AnalysisColumns
    analysis_trace_finished_ms: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, job_id: _Optional[_Iterable[str]] = ..., users: _Optional[_Iterable[str]] = ..., user_index: _Optional[_Iterable[int]] = ..., hostnames: _Optional[_Iterable[str]] = ..., hostname_index: _Optional[_Iterable[int]] = ..., first_seen_ms: _Optional[_Iterable[int]] = ..., last_seen_ms: _Optional[_Iterable[int]] = ..., running: _Optional[_Iterable[bool]] = ..., gpus_max: _Optional[_Iterable[int]] = ..., gpu_seconds: _Optional[_Iterable[float]] = ..., busy_gpu_seconds: _Optional[_Iterable[float]] = ..., traces: _Optional[_Iterable[int]] = ..., simulated: _Optional[_Iterable[bool]] = ..., gpm_rows: _Optional[_Iterable[int]] = ..., sm_active_gpu_seconds: _Optional[_Iterable[float]] = ..., gpm_gpu_seconds: _Optional[_Iterable[float]] = ..., analysed_rows: _Optional[_Iterable[int]] = ..., analyzed_ms: _Optional[_Iterable[int]] = ..., analysis_state: _Optional[_Iterable[_Union[AnalysisState, str]]] = ..., analysis_failure: _Optional[_Iterable[_Union[AnalysisFailure, str]]] = ..., top_rule: _Optional[_Iterable[int]] = ..., top_rule_share: _Optional[_Iterable[float]] = ..., rules: _Optional[_Iterable[str]] = ..., analyses: _Optional[_Union[AnalysisColumns, _Mapping]] = ..., analysis_trace_finished_ms: _Optional[_Iterable[int]] = ...) -> None: ...

class AnalysisColumns(_message.Message):
    __slots__ = ("rule_count", "failure_message_index", "failure_messages", "rule", "time_lost_share", "title_index", "fix_index", "titles", "fixes")
    RULE_COUNT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_MESSAGE_INDEX_FIELD_NUMBER: _ClassVar[int]
    FAILURE_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    TIME_LOST_SHARE_FIELD_NUMBER: _ClassVar[int]
    TITLE_INDEX_FIELD_NUMBER: _ClassVar[int]
    FIX_INDEX_FIELD_NUMBER: _ClassVar[int]
    TITLES_FIELD_NUMBER: _ClassVar[int]
    FIXES_FIELD_NUMBER: _ClassVar[int]
    rule_count: _containers.RepeatedScalarFieldContainer[int]
    failure_message_index: _containers.RepeatedScalarFieldContainer[int]
    failure_messages: _containers.RepeatedScalarFieldContainer[str]
    rule: _containers.RepeatedScalarFieldContainer[int]
    time_lost_share: _containers.RepeatedScalarFieldContainer[float]
    title_index: _containers.RepeatedScalarFieldContainer[int]
    fix_index: _containers.RepeatedScalarFieldContainer[int]
    titles: _containers.RepeatedScalarFieldContainer[str]
    fixes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rule_count: _Optional[_Iterable[int]] = ..., failure_message_index: _Optional[_Iterable[int]] = ..., failure_messages: _Optional[_Iterable[str]] = ..., rule: _Optional[_Iterable[int]] = ..., time_lost_share: _Optional[_Iterable[float]] = ..., title_index: _Optional[_Iterable[int]] = ..., fix_index: _Optional[_Iterable[int]] = ..., titles: _Optional[_Iterable[str]] = ..., fixes: _Optional[_Iterable[str]] = ...) -> None: ...

class RuleLoss(_message.Message):
    __slots__ = ("rule", "severity", "time_lost_share", "time_lost_us", "ranks", "title", "fix")
    RULE_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    TIME_LOST_SHARE_FIELD_NUMBER: _ClassVar[int]
    TIME_LOST_US_FIELD_NUMBER: _ClassVar[int]
    RANKS_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    FIX_FIELD_NUMBER: _ClassVar[int]
    rule: str
    severity: str
    time_lost_share: float
    time_lost_us: float
    ranks: int
    title: str
    fix: str
    def __init__(self, rule: _Optional[str] = ..., severity: _Optional[str] = ..., time_lost_share: _Optional[float] = ..., time_lost_us: _Optional[float] = ..., ranks: _Optional[int] = ..., title: _Optional[str] = ..., fix: _Optional[str] = ...) -> None: ...

class RankStepStats(_message.Message):
    __slots__ = ("rank", "steps", "mean_step_us", "median_step_us", "std_step_us", "max_step_us", "window_us", "has_gpu", "gpu_idle_share", "gpu_compute_share", "communication_share", "exposed_communication_share")
    RANK_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    MEAN_STEP_US_FIELD_NUMBER: _ClassVar[int]
    MEDIAN_STEP_US_FIELD_NUMBER: _ClassVar[int]
    STD_STEP_US_FIELD_NUMBER: _ClassVar[int]
    MAX_STEP_US_FIELD_NUMBER: _ClassVar[int]
    WINDOW_US_FIELD_NUMBER: _ClassVar[int]
    HAS_GPU_FIELD_NUMBER: _ClassVar[int]
    GPU_IDLE_SHARE_FIELD_NUMBER: _ClassVar[int]
    GPU_COMPUTE_SHARE_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_SHARE_FIELD_NUMBER: _ClassVar[int]
    EXPOSED_COMMUNICATION_SHARE_FIELD_NUMBER: _ClassVar[int]
    rank: int
    steps: int
    mean_step_us: float
    median_step_us: float
    std_step_us: float
    max_step_us: float
    window_us: float
    has_gpu: bool
    gpu_idle_share: float
    gpu_compute_share: float
    communication_share: float
    exposed_communication_share: float
    def __init__(self, rank: _Optional[int] = ..., steps: _Optional[int] = ..., mean_step_us: _Optional[float] = ..., median_step_us: _Optional[float] = ..., std_step_us: _Optional[float] = ..., max_step_us: _Optional[float] = ..., window_us: _Optional[float] = ..., has_gpu: _Optional[bool] = ..., gpu_idle_share: _Optional[float] = ..., gpu_compute_share: _Optional[float] = ..., communication_share: _Optional[float] = ..., exposed_communication_share: _Optional[float] = ...) -> None: ...

class GetTraceSummaryRequest(_message.Message):
    __slots__ = ("trace_id", "include_rank_parts")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_RANK_PARTS_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    include_rank_parts: bool
    def __init__(self, trace_id: _Optional[str] = ..., include_rank_parts: _Optional[bool] = ...) -> None: ...

class TraceSummary(_message.Message):
    __slots__ = ("trace_id", "job_id", "user", "hostname", "periodic", "state", "failure", "failure_message", "trace_finished_ms", "analyzed_ms", "analysis_cpu_s", "rules", "ranks", "rank_parts", "rank_parts_thinned", "analysed_window")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    PERIODIC_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRACE_FINISHED_MS_FIELD_NUMBER: _ClassVar[int]
    ANALYZED_MS_FIELD_NUMBER: _ClassVar[int]
    ANALYSIS_CPU_S_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    RANKS_FIELD_NUMBER: _ClassVar[int]
    RANK_PARTS_FIELD_NUMBER: _ClassVar[int]
    RANK_PARTS_THINNED_FIELD_NUMBER: _ClassVar[int]
    ANALYSED_WINDOW_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    job_id: str
    user: str
    hostname: str
    periodic: bool
    state: AnalysisState
    failure: AnalysisFailure
    failure_message: str
    trace_finished_ms: int
    analyzed_ms: int
    analysis_cpu_s: float
    rules: _containers.RepeatedCompositeFieldContainer[RuleLoss]
    ranks: _containers.RepeatedCompositeFieldContainer[RankStepStats]
    rank_parts: bytes
    rank_parts_thinned: bool
    analysed_window: str
    def __init__(self, trace_id: _Optional[str] = ..., job_id: _Optional[str] = ..., user: _Optional[str] = ..., hostname: _Optional[str] = ..., periodic: _Optional[bool] = ..., state: _Optional[_Union[AnalysisState, str]] = ..., failure: _Optional[_Union[AnalysisFailure, str]] = ..., failure_message: _Optional[str] = ..., trace_finished_ms: _Optional[int] = ..., analyzed_ms: _Optional[int] = ..., analysis_cpu_s: _Optional[float] = ..., rules: _Optional[_Iterable[_Union[RuleLoss, _Mapping]]] = ..., ranks: _Optional[_Iterable[_Union[RankStepStats, _Mapping]]] = ..., rank_parts: _Optional[bytes] = ..., rank_parts_thinned: _Optional[bool] = ..., analysed_window: _Optional[str] = ...) -> None: ...
