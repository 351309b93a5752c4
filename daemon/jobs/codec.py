"""JobRecord <-> dyno.v1 JobRecord: the wire message is also how the job database stores a record (its `data`
column), so a field added to both needs no migration and a page of ListJobs is parsed in C, not field by field."""

from __future__ import annotations

from dyno.daemon.jobs.records import JobRecord
from dyno.message_fields import from_message, message_kwargs
from dyno.v1 import dyno_pb2

__all__ = ["record_to_proto", "record_from_proto"]


def record_to_proto(r: JobRecord) -> dyno_pb2.JobRecord:
    return dyno_pb2.JobRecord(**message_kwargs(r))


def record_from_proto(m: dyno_pb2.JobRecord) -> JobRecord:
    return from_message(JobRecord, m)
