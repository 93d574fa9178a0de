"""Long-lived processes over a store: the ``Worker`` (claims runs and drives them), the
executor ``Pool``, running either until a signal, and the garbage collector's tuning.

The top of ``stead.runtime``: imports the facade (``Runtime``) and the parts below it."""

from stead.runtime.processes._gc import tune_gc
from stead.runtime.processes._pool import Pool, serve_pool
from stead.runtime.processes._signals import Served, until_signalled
from stead.runtime.processes._worker import Worker, serve_worker

__all__ = ["Pool", "Served", "Worker", "serve_pool", "serve_worker", "tune_gc", "until_signalled"]
