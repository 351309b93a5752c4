"""Event categories of the columnar model: the ``Cat`` codes of complete events, the Kineto ``cat`` strings they
come from, the category groups analyses share, and the phase codes of flow events.

Part of the model (``dyno.trace_analysis.model`` re-exports every name here).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum

__all__ = [
    "Cat",
    "CAT_BY_NAME",
    "GPU_ACTIVITY_CATS",
    "GPU_CATS",
    "EXTRA_ARGS_CATS",
    "FLOW_START",
    "FLOW_FINISH",
    "FLOW_STEP",
]


class Cat(IntEnum):
    """Category codes of complete events (Kineto ``cat`` strings, see ``CAT_BY_NAME``). Compare columns with
    ``.value`` (``ev.cat == Cat.KERNEL.value``): numpy converts an IntEnum member ~5x slower than a plain int."""

    OTHER = 0
    KERNEL = 1
    GPU_MEMCPY = 2
    GPU_MEMSET = 3
    CUDA_RUNTIME = 4
    CUDA_DRIVER = 5
    CPU_OP = 6
    USER_ANNOTATION = 7
    GPU_USER_ANNOTATION = 8
    PYTHON_FUNCTION = 9
    CUDA_SYNC = 10
    CPU_INSTANT_EVENT = 11
    TRACE = 12  # the "PyTorch Profiler (0)" span
    CUDA_PROFILER_RANGE = 13
    OVERHEAD = 14
    PRIVATEUSE1_RUNTIME = 15
    PRIVATEUSE1_DRIVER = 16
    MTIA_RUNTIME = 17
    MTIA_CCP_EVENTS = 18


CAT_BY_NAME: Mapping[str, Cat] = {
    "kernel": Cat.KERNEL,
    "gpu_memcpy": Cat.GPU_MEMCPY,
    "gpu_memset": Cat.GPU_MEMSET,
    "cuda_runtime": Cat.CUDA_RUNTIME,
    "cuda_driver": Cat.CUDA_DRIVER,
    "cpu_op": Cat.CPU_OP,
    "operator": Cat.CPU_OP,  # older Kineto name
    "user_annotation": Cat.USER_ANNOTATION,
    "gpu_user_annotation": Cat.GPU_USER_ANNOTATION,
    "python_function": Cat.PYTHON_FUNCTION,
    "cuda_sync": Cat.CUDA_SYNC,
    "cpu_instant_event": Cat.CPU_INSTANT_EVENT,
    "trace": Cat.TRACE,
    "cuda_profiler_range": Cat.CUDA_PROFILER_RANGE,
    "overhead": Cat.OVERHEAD,
    "privateuse1_runtime": Cat.PRIVATEUSE1_RUNTIME,
    "privateuse1_driver": Cat.PRIVATEUSE1_DRIVER,
    "mtia_runtime": Cat.MTIA_RUNTIME,
    "mtia_ccp_events": Cat.MTIA_CCP_EVENTS,
}

# Work that occupies the GPU (what "GPU busy" means for dyno; HTA also counts cuda_sync rows, see docs).
GPU_ACTIVITY_CATS: tuple[Cat, ...] = (Cat.KERNEL, Cat.GPU_MEMCPY, Cat.GPU_MEMSET)
# Every row drawn on a GPU timeline.
GPU_CATS: tuple[Cat, ...] = (Cat.KERNEL, Cat.GPU_MEMCPY, Cat.GPU_MEMSET, Cat.CUDA_SYNC, Cat.GPU_USER_ANNOTATION)
# Rare categories whose full args dict is kept in Trace.extra_args.
EXTRA_ARGS_CATS: tuple[Cat, ...] = (
    Cat.OTHER,
    Cat.USER_ANNOTATION,
    Cat.GPU_USER_ANNOTATION,
    Cat.CUDA_SYNC,
    Cat.TRACE,
    Cat.CUDA_PROFILER_RANGE,
    Cat.CPU_INSTANT_EVENT,
)

FLOW_START = 0
FLOW_FINISH = 1
FLOW_STEP = 2
