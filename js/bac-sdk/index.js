// Bac's extras from Node, over Bac's REST API (no dependencies: Node's own fetch).
//
// The official `e2b` npm SDK already does everything E2B has (create, commands, files,
// pause, connect, ...) against a Bac server; this client adds what only Bac has:
// checkpoints and their roll-back, forks, named snapshots, pause without memory, and the
// trace (paged, followed live, or for a whole run). Same configuration as the e2b SDK:
// BAC_API_URL / E2B_API_URL and BAC_API_KEY / E2B_API_KEY, or the constructor's options.

const DEFAULT_API_URL = 'http://localhost:3000'

/** A failed request: `status` is the HTTP status (0: the server was not reached). */
export class BacError extends Error {
  constructor (message, status) {
    super(message)
    this.name = 'BacError'
    this.status = status
  }
}

function env (...names) {
  for (const name of names) {
    const value = process.env[name]
    if (value) return value
  }
  return undefined
}

function sandboxPath (sandboxId, suffix = '') {
  if (typeof sandboxId !== 'string' || !/^[A-Za-z0-9]+$/.test(sandboxId)) {
    throw new BacError(`invalid sandbox id ${JSON.stringify(sandboxId)}`, 400)
  }
  return `/sandboxes/${sandboxId}${suffix}`
}

function checkpointOf (raw) {
  return {
    checkpointId: raw.checkpointID,
    sandboxId: raw.sandboxID,
    name: raw.name ?? null,
    createdAt: new Date(raw.createdAt),
    sizeBytes: raw.sizeBytes,
    memory: raw.memory
  }
}

function eventOf (raw) {
  return {
    id: raw.id,
    sandboxId: raw.sandboxID,
    timestamp: new Date(raw.timestamp),
    kind: raw.kind,
    level: raw.level,
    message: raw.message,
    fields: raw.fields ?? {},
    metadata: raw.metadata ?? {}
  }
}

function traceQuery ({ kinds, after, limit } = {}) {
  const query = new URLSearchParams()
  if (kinds && kinds.length) query.set('kind', kinds.join(','))
  if (after) query.set('after', String(after))
  if (limit !== undefined) query.set('limit', String(limit))
  return query
}

export class BacClient {
  /** @param {{apiUrl?: string, apiKey?: string, requestTimeoutMs?: number}} [opts] */
  constructor (opts = {}) {
    this.apiUrl = (opts.apiUrl ?? env('BAC_API_URL', 'E2B_API_URL') ?? DEFAULT_API_URL)
      .replace(/\/+$/, '')
    this.apiKey = opts.apiKey ?? env('BAC_API_KEY', 'E2B_API_KEY')
    if (!this.apiKey) {
      throw new BacError('no API key: pass apiKey, or set BAC_API_KEY (or E2B_API_KEY)', 401)
    }
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 60_000
  }

  async _fetch (method, path, { body, query, stream = false } = {}) {
    const url = this.apiUrl + path + (query && [...query].length ? `?${query}` : '')
    const init = {
      method,
      headers: { 'X-API-KEY': this.apiKey, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body)
    }
    if (!stream && this.requestTimeoutMs) init.signal = AbortSignal.timeout(this.requestTimeoutMs)
    let response
    try {
      response = await fetch(url, init)
    } catch (err) {
      throw new BacError(`cannot reach ${this.apiUrl}: ${err.cause?.message ?? err.message}`, 0)
    }
    if (!response.ok) {
      const text = await response.text()
      let message = text
      try { message = JSON.parse(text).message ?? text } catch {}
      throw new BacError(`${response.status}: ${message}`, response.status)
    }
    return response
  }

  async _json (method, path, opts) {
    const response = await this._fetch(method, path, opts)
    const text = await response.text()
    return text ? JSON.parse(text) : null
  }

  /** Pause; `memory: false` keeps only the files (resuming boots afresh). False if it was already paused. */
  async pause (sandboxId, { memory = true } = {}) {
    try {
      await this._fetch('POST', sandboxPath(sandboxId, '/pause'), { body: memory ? {} : { memory: false } })
    } catch (err) {
      if (err.status === 409) return false
      throw err
    }
    return true
  }

  /** Resume a paused sandbox (same id, processes, memory); on a running one only extends its end. */
  async resume (sandboxId, { timeoutMs, memory = true } = {}) {
    const body = {}
    if (timeoutMs !== undefined) body.timeout = Math.ceil(timeoutMs / 1000)
    if (!memory) body.memory = false
    await this._fetch('POST', '/v2' + sandboxPath(sandboxId, '/connect'), { body })
  }

  /** Save the sandbox's state now (files, and processes with their memory unless `memory: false`); it keeps running. */
  async checkpoint (sandboxId, { name, memory = true } = {}) {
    const body = { memory }
    if (name !== undefined) body.name = name
    return checkpointOf(await this._json('POST', sandboxPath(sandboxId, '/checkpoints'), { body }))
  }

  /** The sandbox's checkpoints, oldest first. */
  async checkpoints (sandboxId) {
    return (await this._json('GET', sandboxPath(sandboxId, '/checkpoints'))).map(checkpointOf)
  }

  /** The id of a checkpoint given by id or by the name it was taken with (a name several share is refused). */
  async _checkpointId (sandboxId, checkpoint) {
    if (typeof checkpoint === 'object' && checkpoint?.checkpointId) return checkpoint.checkpointId
    const found = await this.checkpoints(sandboxId)
    if (found.some(c => c.checkpointId === checkpoint)) return checkpoint
    const named = found.filter(c => c.name === checkpoint)
    if (named.length === 1) return named[0].checkpointId
    if (named.length > 1) throw new BacError(`${named.length} checkpoints are named ${JSON.stringify(checkpoint)}; give one by its id`, 400)
    throw new BacError(`sandbox ${sandboxId} has no checkpoint with the id or name ${JSON.stringify(checkpoint)}`, 404)
  }

  /** Roll the sandbox (running or paused) back to a checkpoint (object, id or name); it is running afterwards. */
  async restore (sandboxId, checkpoint) {
    const id = encodeURIComponent(await this._checkpointId(sandboxId, checkpoint))
    await this._fetch('POST', sandboxPath(sandboxId, `/checkpoints/${id}/restore`), { body: {} })
  }

  async deleteCheckpoint (sandboxId, checkpoint) {
    const id = encodeURIComponent(await this._checkpointId(sandboxId, checkpoint))
    await this._fetch('DELETE', sandboxPath(sandboxId, `/checkpoints/${id}`))
  }

  /** Take a checkpoint every `everySeconds`, keeping the last `keep` (everySeconds null: stop). */
  async scheduleCheckpoints (sandboxId, { everySeconds, keep = null }) {
    await this._fetch('PUT', sandboxPath(sandboxId, '/checkpoints/schedule'), { body: { intervalSeconds: everySeconds, keep } })
  }

  /** A snapshot that outlives the sandbox: `Sandbox.create(snapshotId)` (e2b SDK) starts new sandboxes from it. */
  async snapshot (sandboxId, { name, memory = true } = {}) {
    const body = memory ? {} : { memory: false }
    if (name !== undefined) body.name = name
    const raw = await this._json('POST', sandboxPath(sandboxId, '/snapshots'), { body })
    return { snapshotId: raw.snapshotID, names: raw.names, sizeBytes: raw.sizeBytes ?? null }
  }

  /** `count` new sandboxes continuing from this one's state: per fork `{sandboxId}` (connect to it with the e2b SDK) or `{error}`. */
  async fork (sandboxId, { count = 1, timeoutMs } = {}) {
    const body = { count }
    if (timeoutMs !== undefined) body.timeout = Math.ceil(timeoutMs / 1000)
    const made = await this._json('POST', sandboxPath(sandboxId, '/fork'), { body })
    return made.map(item => item.sandbox
      ? { sandboxId: item.sandbox.sandboxID }
      : { error: new BacError(item.error?.message ?? 'fork failed', item.error?.code ?? 500) })
  }

  /** A page of the sandbox's trace, oldest first: pass `nextCursor` as `after` for the next. */
  async trace (sandboxId, { kinds, after = 0, limit = 100 } = {}) {
    const page = await this._json('GET', sandboxPath(sandboxId, '/trace'), { query: traceQuery({ kinds, after, limit }) })
    return { events: page.events.map(eventOf), nextCursor: page.nextCursor ?? null }
  }

  /** A page of a run's trace: every sandbox of the team whose metadata holds each pair. */
  async traceRun (metadata, { kinds, after = 0, limit = 100 } = {}) {
    const query = traceQuery({ kinds, after, limit })
    query.set('metadata', Object.entries(metadata).map(([k, v]) => `${k}:${v}`).join(','))
    const page = await this._json('GET', '/trace', { query })
    return { events: page.events.map(eventOf), nextCursor: page.nextCursor ?? null }
  }

  /** The trace after `after`, then each new event as it happens, until the sandbox ends (`break` to stop). */
  async * followTrace (sandboxId, { kinds, after = 0 } = {}) {
    const query = traceQuery({ kinds, after })
    query.set('follow', 'true')
    const response = await this._fetch('GET', sandboxPath(sandboxId, '/trace'), { query, stream: true })
    const decoder = new TextDecoder()
    let pending = ''
    try {
      for await (const chunk of response.body) {
        pending += decoder.decode(chunk, { stream: true })
        let newline
        while ((newline = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, newline).trim()
          pending = pending.slice(newline + 1)
          if (line) yield eventOf(JSON.parse(line))
        }
      }
    } finally {
      await response.body.cancel().catch(() => {})
    }
  }
}
