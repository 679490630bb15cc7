"""delayq: enqueue, cancel and inspect delayed jobs in Redis from Python.

    import delayq
    from datetime import timedelta
    dq = delayq.Client.from_url("redis://localhost:6379/0")
    dq.enqueue("orders", "order.cancel", b'{"order":1234}',
               delay=timedelta(minutes=30), id="order:1234:cancel")
    dq.cancel("orders", "order:1234:cancel")   # True when it was cancelled
"""
from .client import PROTOCOL_VERSION, Client
from .conn import Options
from .errors import (AuthError, ConfigError, ConnectError, DeadError, Error, ExistsError,
                     InvalidError, NotFoundError, ProtocolVersionError, RedisError,
                     RunningError, StaleError, TimeoutError, TooLargeError, UniqueError)
from .jobs import DeadJob, DeadPage, Enqueued, Job, Schedule, Stats

__version__ = "0.1.0"
__all__ = ["Client", "Options", "PROTOCOL_VERSION", "Error", "InvalidError", "NotFoundError",
           "ExistsError", "UniqueError", "RunningError", "DeadError", "StaleError",
           "TooLargeError", "ConnectError", "AuthError", "TimeoutError", "RedisError",
           "ProtocolVersionError", "ConfigError", "Job", "Stats", "DeadJob", "DeadPage",
           "Schedule", "Enqueued"]
