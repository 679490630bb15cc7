"""What the calls return: a job as show reads it, a queue's figures, the
dead list, a schedule."""
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import List, Optional


def _dt(ms):
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


@dataclass
class Job:
    """A job as `show` reads it.  payload is bytes (any bytes); type,
    last_error are str (decoded as UTF-8, undecodable bytes escaped).
    State "done": the job finished within its dedupe window (state_ms is
    when, unique_until_ms when the window ends; the other fields are ""
    or 0); its id is taken until then.  State "cancelled": the job was
    cancelled while it ran (state_ms is when, fence the run that was
    stopped, unique_until_ms when its id is free: that run's lease end,
    or its window's if later; the other fields are "" or 0)."""
    id: str
    state: str            # delayed, processing, dead, orphan, unreadable, done, cancelled
    type: str
    payload: bytes
    attempts: int         # attempts made (the one running included)
    max_attempts: int     # 0: the consumer's default
    priority: int         # 0 (most urgent) .. 9; 5 normal
    created_ms: int
    due_ms: int
    fence: int            # the claim's fence while processing (cancelled: the stopped run's)
    last_error: str
    state_ms: int         # due time, lease deadline or time of death
    now_ms: int           # the server's time when read
    unreadable: str = ""  # why the record cannot be read, "" when it can
    where: str = ""       # the set that holds the id
    expire_at_ms: int = 0  # when it expires if not started by then; 0: never
    on_expire: str = ""   # what then: "dead" or "drop"; "" when it never expires
    unique_ms: int = 0    # its dedupe window (ms); 0: none
    unique_until_ms: int = 0  # state "done", "cancelled": when the id is free; else 0

    @property
    def due(self) -> datetime:
        return _dt(self.due_ms)

    @property
    def expire_at(self) -> Optional[datetime]:
        return _dt(self.expire_at_ms) if self.expire_at_ms > 0 else None

    @property
    def created(self) -> datetime:
        return _dt(self.created_ms)

    @property
    def unique_until(self) -> Optional[datetime]:
        return _dt(self.unique_until_ms) if self.unique_until_ms > 0 else None


@dataclass
class Stats:
    delayed: int          # waiting, not yet due
    due: int              # due, waiting for a worker
    processing: int
    expired: int          # processing past their lease
    dead: int
    next_due_in_ms: int   # -1 when nothing is delayed
    now_ms: int
    due_by_priority: List[int] = field(default_factory=lambda: [0] * 10)
    paused_since_ms: int = -1
    jobs_expired: int = 0  # jobs that reached their expiry unstarted, ever
    jobs_cancelled: int = 0  # jobs cancelled, waiting or running, ever


@dataclass
class DeadJob:
    id: str
    died_ms: int
    type: str
    attempts: int
    last_error: str
    payload_bytes: int
    unreadable: str = ""


@dataclass
class DeadPage:
    total: int
    jobs: List[DeadJob]


@dataclass
class Schedule:
    name: str
    expr: str
    tz: str               # "" for UTC
    type: str
    payload: bytes
    max_attempts: int
    catch_up: str         # one, all, none
    next_ms: int          # -1 while paused
    readable: bool = True
    paused_since_ms: int = -1   # when it was paused; -1: it is not

    @property
    def next(self) -> Optional[datetime]:
        """The next tick; None while paused (next_ms -1)."""
        return _dt(self.next_ms) if self.next_ms >= 0 else None


@dataclass
class Enqueued:
    """What an add did: one job of enqueue_many, or enqueue with
    detail=True (as libdelayq's dq_enqueued).  Its id and due time (Unix
    ms, server clock), or in enqueue_many the error that refused it (then
    id is the id asked for, or None; enqueue raises it instead).
    replaced: an existing job was rescheduled (replace).  finished:
    nothing was added, as the job of that id finished within its dedupe
    window (without error with unique_ok; due_ms is then 0; enqueue also
    gives when it finished and when the window ends, and with cancelled
    that the job of that id was cancelled while it ran: its id is kept
    until that run's lease would have ended, unique_until_ms).  A debounced add
    (enqueue only): debounced, it took the place of the waiting job of that id;
    next_run, that job is running and the add is its next run, which
    takes its place when that attempt ends (due at due_ms, or then if
    that has passed); neither, a new job."""
    id: Optional[str]
    due_ms: int = 0
    error: Optional[Exception] = None
    finished: bool = False
    replaced: bool = False
    debounced: bool = False
    next_run: bool = False
    finished_ms: int = 0
    unique_until_ms: int = 0
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None
