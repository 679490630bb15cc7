"""delayq's errors: one class per libdelayq status, each with its .code.

The codes are the C library's dq_status names without DQ_ERR_, in lower
case; the messages are libdelayq's one-line messages.
"""


class Error(Exception):
    """Any failure of a delayq call; .code names which (see CODES)."""

    code = "redis"

    def __init__(self, message):
        super().__init__(message)
        self.message = message

    def __str__(self):
        return self.message


class InvalidError(Error, ValueError):
    """The caller's argument is unusable (the message names it)."""
    code = "invalid"


class NotFoundError(Error):
    """No such job (in the state asked for), or no such schedule."""
    code = "notfound"


class ExistsError(Error):
    """enqueue: the id is taken and replace was not asked."""
    code = "exists"


class UniqueError(Error):
    """enqueue: the job of this id finished within its dedupe window
    (unique_for), and unique_ok was not asked: nothing was added.
    .finished_ms is when it finished and .until_ms when the window ends
    (Unix ms, server clock); both None in enqueue_many's results, whose
    reply does not carry them.  .cancelled: what keeps the id is a job of
    that id cancelled while it ran (finished_ms the cancel, until_ms the
    end of that run's lease, or of its window if later), as libdelayq's
    dq_enqueued.cancelled; False when the reply does not say."""
    code = "unique"

    def __init__(self, message, finished_ms=None, until_ms=None, cancelled=False):
        super().__init__(message)
        self.finished_ms = finished_ms
        self.until_ms = until_ms
        self.cancelled = cancelled


class RunningError(Error):
    """The job is being processed and cannot be changed (run_now, a
    replace; a cancel only from a server whose scripts predate cancelling
    a running job)."""
    code = "running"


class DeadError(Error):
    """cancel, run_now: the job is dead already."""
    code = "dead"


class StaleError(Error):
    """The job is no longer held under this fence."""
    code = "stale"


class TooLargeError(Error, ValueError):
    """The payload is over the configured limit."""
    code = "too_large"


class ConnectError(Error):
    """Redis could not be reached, or the connection broke."""
    code = "connect"


class AuthError(Error):
    """Redis refused the password or user, or SELECT."""
    code = "auth"


class TimeoutError(Error):  # noqa: A001 (delayq.TimeoutError, as the code says)
    """Redis did not answer in time, or a write was not replicated in time."""
    code = "timeout"


class RedisError(Error):
    """Redis answered with an error, or with data this client cannot use."""
    code = "redis"


class ProtocolVersionError(RedisError):
    """The queue's data was written with a protocol version this client
    does not know (the meta field `protocol`): upgrade the client."""


class ConfigError(InvalidError):
    """A delayqd.conf that cannot be used: the message starts FILE:LINE."""


CODES = {cls.code: cls for cls in (InvalidError, NotFoundError, ExistsError, UniqueError,
                                   RunningError, DeadError, StaleError, TooLargeError,
                                   ConnectError, AuthError, TimeoutError, RedisError)}
