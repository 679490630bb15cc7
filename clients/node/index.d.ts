// Types of the delayq Node client (hand-written; the code is CommonJS).

/// <reference types="node" />

export type ErrorCode = 'invalid' | 'notfound' | 'exists' | 'unique' | 'running' | 'dead'
  | 'stale' | 'too_large' | 'connect' | 'auth' | 'timeout' | 'redis';

/** Every call rejects with this: `code` is libdelayq's status, the message its one line. */
export class DelayqError extends Error {
  constructor(code: ErrorCode, message: string);
  readonly code: ErrorCode;
  /** code 'unique': when the job of that id finished (Unix ms); null in enqueueMany's results. */
  readonly finishedMs?: number | null;
  /** code 'unique': when its dedupe window ends (Unix ms); null in enqueueMany's results. */
  readonly untilMs?: number | null;
  /**
   * code 'unique': what keeps the id is a job of that id cancelled while it ran (finishedMs the
   * cancel, untilMs the end of that run's lease, or of its window if later).
   */
  readonly cancelled?: boolean;
}

export const CODES: readonly ErrorCode[];
/** 100 years of 365 days, in ms: the furthest a job may be due. */
export const MAX_AHEAD_MS: number;
/** "30m", "1h30m", "500ms", "90" (seconds) -> ms; throws an Error on bad input. */
export function parseDuration(text: string): number;

export interface TlsOptions {
  ca?: string | Buffer | Array<string | Buffer>;
  cert?: string | Buffer;
  key?: string | Buffer;
  servername?: string;
  rejectUnauthorized?: boolean;
}

export interface HostPort { host: string; port: number; }

export interface SentinelOptions {
  /** The master's name at the sentinels. */
  master: string;
  nodes: HostPort[];
  user?: string;
  password?: string;
}

export interface ClientOptions {
  host?: string;                 // default 127.0.0.1
  port?: number;                 // default 6379
  /** A unix socket, instead of host and port. */
  path?: string;
  db?: number;
  user?: string;
  password?: string;
  tls?: TlsOptions;
  sentinel?: SentinelOptions;
  cluster?: boolean;
  /** Seed nodes of a cluster (default host:port). */
  nodes?: HostPort[];
  prefix?: string;               // default "dq"
  maxPayload?: number;           // bytes, default 1048576
  connectTimeout?: number;       // ms, default 5000
  commandTimeout?: number;       // ms, default 5000; 0 waits for ever
  keepalive?: boolean;
  durability?: 'local' | 'replicated';
  replicationTimeout?: number;   // ms, WAIT's timeout, default 1000
}

export type Payload = Buffer | Uint8Array | string;
export type Priority = 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 'high' | 'normal' | 'low';

export interface EnqueueOptions {
  /** ms, or a duration text: "30m", "1h30m". */
  delay?: number | string;
  /** An absolute due time: a Date or Unix ms. */
  at?: Date | number;
  /** Your id (not all digits); none: Redis generates a decimal one. */
  id?: string;
  /** Reschedule an existing job with this id. */
  replace?: boolean;
  priority?: Priority;
  /** 0: the consumer's default for the type. */
  maxAttempts?: number;
  /** Not run unless started by then (a Date or Unix ms, after the due time). */
  expireAt?: Date | number;
  /** Not run unless started this long after the due time: ms, or a duration text ("10m"); 0: never. */
  ttl?: number | string;
  /** An expired job goes to dead with the error "expired" ('dead', the default) or is deleted. */
  onExpire?: 'dead' | 'drop';
  /**
   * A dedupe window (needs an id): for this long after the job is done, an add of its id
   * is refused (code 'unique'). ms, or a duration text ("1h"); 1 ms..100 years.
   */
  uniqueFor?: number | string;
  /** Within a window, resolve with the id (nothing added) rather than reject. */
  uniqueOk?: boolean;
  /**
   * Debounce (enqueue only; needs an id; no delay, at, replace, expiry or window): while the
   * job of that id waits, this add takes its place (payload, type, maxAttempts, priority), due
   * this long from now; while it runs, the add is its next run, which takes its place when that
   * attempt ends; with no job, a new one due this long from now. ms, or a duration text
   * ("500ms"); 1 ms..100 years.
   */
  debounce?: number | string;
  /** With debounce: never due later than this long after the job's first add. ms or a duration text. */
  maxWait?: number | string;
}

/** enqueue's options: with detail: true it resolves to an Enqueued, not the id. */
export interface EnqueueCallOptions extends EnqueueOptions {
  detail?: boolean;
}

/** What one enqueue did (detail: true), as libdelayq's dq_enqueued; a flag is there only when true. */
export interface Enqueued {
  id: string;
  /** When it is due (Unix ms, server clock); 0 when nothing was added (finished). */
  dueMs: number;
  /** An existing job of that id was rescheduled (replace). */
  replaced?: boolean;
  /** Nothing was added: the job of that id finished within its dedupe window (uniqueOk). */
  finished?: boolean;
  /** finished: when it finished and when its window ends (Unix ms). */
  finishedMs?: number;
  untilMs?: number;
  /** finished: the job of that id was cancelled while it ran; its id is kept until untilMs. */
  cancelled?: boolean;
  /** A debounced add that a waiting job of that id took. */
  debounced?: boolean;
  /** A debounced add kept as the running job's next run: it takes the job's place when that attempt ends. */
  nextRun?: boolean;
}

/** A job of enqueueMany: a debounce is refused there ('invalid': a debounced add goes one at a time). */
export interface EnqueueJob extends EnqueueOptions {
  queue: string;
  type: string;
  payload: Payload;
}

/**
 * replaced: an existing job of that id was rescheduled; finished: nothing was added, the job of
 * that id finished within its dedupe window (uniqueOk).
 */
export type EnqueueResult = { id: string; replaced?: boolean; finished?: boolean; error?: undefined }
  | { id?: undefined; replaced?: undefined; finished?: undefined; error: DelayqError };

export interface Job {
  id: string;
  /**
   * 'done': finished within its dedupe window (stateMs when; the other fields '' or 0).
   * 'cancelled': cancelled while it ran (stateMs when, fence the run that was stopped; the
   * other fields '' or 0), its id kept until uniqueUntilMs.
   */
  state: 'delayed' | 'processing' | 'dead' | 'orphan' | 'unreadable' | 'done' | 'cancelled';
  type: string;
  payload: Buffer;
  attempts: number;
  maxAttempts: number;
  createdMs: number;
  dueMs: number;
  /** The claim's fence while processing; state 'cancelled': the stopped run's; otherwise 0. */
  fence: number;
  lastError: string;
  /** Due time, lease deadline or time of death. */
  stateMs: number;
  nowMs: number;
  /** "" or why the record cannot be read. */
  unreadable: string;
  where: string;
  priority: number;
  /** When it expires if it has not started (Unix ms); 0: never (a dead job expires no more). */
  expireAtMs: number;
  /** What then happens to it; '' when it never expires. */
  onExpire: 'dead' | 'drop' | '';
  /** Its dedupe window (ms); 0: none. */
  uniqueMs: number;
  /** States 'done' and 'cancelled': when its id is free (Unix ms); otherwise 0. */
  uniqueUntilMs: number;
}

export interface Stats {
  delayed: number;
  due: number;
  processing: number;
  expired: number;
  dead: number;
  nextDueInMs: number;
  nowMs: number;
  dueByPriority: number[];
  /** Jobs that reached their expiry unstarted, ever (a counter kept in Redis). */
  jobsExpired: number;
  /** Jobs cancelled, waiting or running, ever (a counter kept in Redis; 0 from older scripts). */
  jobsCancelled: number;
}

export interface DeadJob {
  id: string;
  diedMs: number;
  type: string;
  attempts: number;
  lastError: string;
  payloadBytes: number;
  unreadable: string;
}

export interface DeadPage { total: number; jobs: DeadJob[]; }

export interface ScheduleOptions {
  /** An IANA zone; default UTC. */
  tz?: string;
  maxAttempts?: number;
  catchUp?: 'one' | 'all' | 'none';
  replace?: boolean;
}

export interface Schedule {
  name: string;
  expr: string;
  tz: string;
  type: string;
  payload: Buffer;
  maxAttempts: number;
  catchUp: string;
  /** The next tick (Unix ms); -1 while paused (delayq schedule pause) */
  nextMs: number;
  readable: boolean;
  /** when it was paused (server ms); -1 when it is not */
  pausedSinceMs: number;
}

export class Client {
  constructor(options?: ClientOptions);
  /** redis://[user:password@]host[:port][/db], rediss://..., unix:///path[?db=N] */
  static fromUrl(url: string, options?: ClientOptions): Client;
  /** The `redis` group of a delayqd.conf. */
  static fromConfig(path: string, options?: ClientOptions): Client;

  /** Resolves to the job's id; with detail: true, to what the add did. */
  enqueue(queue: string, type: string, payload: Payload,
          options: EnqueueCallOptions & { detail: true }): Promise<Enqueued>;
  enqueue(queue: string, type: string, payload: Payload,
          options?: EnqueueCallOptions & { detail?: false }): Promise<string>;
  enqueue(queue: string, type: string, payload: Payload,
          options?: EnqueueCallOptions): Promise<string | Enqueued>;
  enqueueMany(jobs: EnqueueJob[]): Promise<EnqueueResult[]>;
  /**
   * true: cancelled (a waiting job is deleted; a running one ends at once and its daemon stops
   * the run; its id stays taken until that run's lease would have ended). false: no such job
   * (it finished first, or was never added). Rejects 'dead'; 'running' only from older scripts.
   */
  cancel(queue: string, id: string): Promise<boolean>;
  runNow(queue: string, id: string): Promise<void>;
  show(queue: string, id: string): Promise<Job | null>;
  stats(queue: string): Promise<Stats>;
  pause(queue: string): Promise<number>;
  resume(queue: string): Promise<number>;
  paused(queue: string): Promise<number>;
  deadList(queue: string, page?: { offset?: number; count?: number }): Promise<DeadPage>;
  requeue(queue: string, id: string): Promise<void>;
  requeueAll(queue: string): Promise<number>;
  purge(queue: string, id: string): Promise<void>;
  purgeAll(queue: string): Promise<number>;
  /** The first tick (Unix ms); -1 when the schedule stays paused (a paused one replaced). */
  scheduleAdd(queue: string, name: string, expr: string, type: string, payload: Payload,
              options?: ScheduleOptions): Promise<number>;
  scheduleList(queue: string): Promise<Schedule[]>;
  scheduleRemove(queue: string, name: string): Promise<void>;
  /** Stop its ticks, keep its definition; resolves to when it was paused (the first pause's time). */
  schedulePause(queue: string, name: string): Promise<number>;
  /** Fire again from the first tick after now (missed ticks are not made up); resolves to that tick. */
  scheduleResume(queue: string, name: string): Promise<number>;
  /** One job of the schedule now (id NAME@now-...), outside its ticks. */
  scheduleRunNow(queue: string, name: string): Promise<string>;
  partitions(queue: string): Promise<number>;
  setPartitions(queue: string, n: number): Promise<void>;
  serverTime(): Promise<number>;
  close(): Promise<void>;
}

export function loadRedisConfig(path: string): ClientOptions;
