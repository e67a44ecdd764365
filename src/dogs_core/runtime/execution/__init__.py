"""Execution: one claimed job, from its gate to its settled row.

``Execution`` (``execution.py``) lives the job's life; what it is given is one
``ExecutionServices`` value (``services.py``, built by ``build_services``) and it reports what it
reached through its host (a ``Milestone``). Every final write goes the one settle path
(``settle.py``: ``Settler``). The handler's view is ``JobContext`` (``context.py``). This wing
imports plumbing and the domain only; the worker wing uses it through the names below.
"""

from dogs_core.runtime.execution.execution import Execution
from dogs_core.runtime.execution.services import (
    HISTORY_WRITE_TIMEOUT,
    ExecutionServices,
    Milestone,
    build_services,
    job_extra,
)
from dogs_core.runtime.execution.settle import Settler

__all__ = [
    "HISTORY_WRITE_TIMEOUT",
    "Execution",
    "ExecutionServices",
    "Milestone",
    "Settler",
    "build_services",
    "job_extra",
]
