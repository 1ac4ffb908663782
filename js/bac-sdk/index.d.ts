// Types of @bac/sdk (index.js).

export declare class BacError extends Error {
  /** The HTTP status; 0 when the server was not reached. */
  status: number
}

export interface BacClientOpts {
  /** Default: BAC_API_URL, E2B_API_URL, or http://localhost:3000. */
  apiUrl?: string
  /** Default: BAC_API_KEY or E2B_API_KEY. */
  apiKey?: string
  /** Each request's deadline (0: none). Default 60000. */
  requestTimeoutMs?: number
}

export interface Checkpoint {
  checkpointId: string
  sandboxId: string
  name: string | null
  createdAt: Date
  sizeBytes: number
  memory: boolean
}

export interface SnapshotInfo {
  snapshotId: string
  names: string[]
  sizeBytes: number | null
}

export interface TraceEvent {
  id: number
  sandboxId: string
  timestamp: Date
  /** created, paused, resumed, ..., process, transfer */
  kind: string
  level: string
  message: string
  fields: Record<string, unknown>
  metadata: Record<string, string>
}

export interface TracePage {
  events: TraceEvent[]
  /** Pass as `after` for the next page; null at the end. */
  nextCursor: number | null
}

export interface TraceOpts {
  kinds?: string[]
  after?: number
  limit?: number
}

export type ForkResult = { sandboxId: string, error?: undefined } | { sandboxId?: undefined, error: BacError }

export declare class BacClient {
  constructor (opts?: BacClientOpts)
  readonly apiUrl: string
  pause (sandboxId: string, opts?: { memory?: boolean }): Promise<boolean>
  resume (sandboxId: string, opts?: { timeoutMs?: number, memory?: boolean }): Promise<void>
  checkpoint (sandboxId: string, opts?: { name?: string, memory?: boolean }): Promise<Checkpoint>
  checkpoints (sandboxId: string): Promise<Checkpoint[]>
  restore (sandboxId: string, checkpoint: Checkpoint | string): Promise<void>
  deleteCheckpoint (sandboxId: string, checkpoint: Checkpoint | string): Promise<void>
  scheduleCheckpoints (sandboxId: string, opts: { everySeconds: number | null, keep?: number | null }): Promise<void>
  snapshot (sandboxId: string, opts?: { name?: string, memory?: boolean }): Promise<SnapshotInfo>
  fork (sandboxId: string, opts?: { count?: number, timeoutMs?: number }): Promise<ForkResult[]>
  trace (sandboxId: string, opts?: TraceOpts): Promise<TracePage>
  traceRun (metadata: Record<string, string>, opts?: TraceOpts): Promise<TracePage>
  followTrace (sandboxId: string, opts?: { kinds?: string[], after?: number }): AsyncGenerator<TraceEvent, void, undefined>
}
