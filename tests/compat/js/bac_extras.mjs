// Bac's extras from Node: the official e2b SDK makes and drives the sandbox, the repo's
// @bac/sdk package (js/bac-sdk) does what only Bac has. Configuration from the environment
// only (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY). Prints one JSON line of results.
import { Sandbox } from 'e2b'
import { BacClient, BacError } from '../../../js/bac-sdk/index.js'

const bac = new BacClient()
const runId = `js${Date.now()}`
const sbx = await Sandbox.create({ timeoutMs: 120_000, metadata: { run_id: runId } })
const id = sbx.sandboxId
const result = {}
try {
  await sbx.files.write('/home/user/state.txt', 'v1')
  const saved = await bac.checkpoint(id, { name: 'v1' })
  result.checkpointName = saved.name
  await sbx.files.write('/home/user/state.txt', 'v2')
  await bac.restore(id, 'v1')
  result.afterRestore = await sbx.files.read('/home/user/state.txt')
  result.checkpoints = (await bac.checkpoints(id)).map(c => c.name)
  try {
    await bac.restore(id, 'nope')
  } catch (err) {
    result.unknownCheckpoint = { status: err.status, isBacError: err instanceof BacError, message: err.message }
  }

  await sbx.commands.run('echo traced-from-js')
  // envd's reports reach the trace in batches: follow it until the command is in.
  for await (const event of bac.followTrace(id, { kinds: ['process'] })) {
    if (JSON.stringify(event).includes('traced-from-js')) break
  }
  const page = await bac.trace(id, { kinds: ['process'] })
  result.tracedCommands = page.events.map(e => JSON.stringify(e.fields))
  result.runEvents = (await bac.traceRun({ run_id: runId })).events.length

  const [fork] = await bac.fork(id, { count: 1, timeoutMs: 60_000 })
  const forked = await Sandbox.connect(fork.sandboxId)
  result.forkReads = await forked.files.read('/home/user/state.txt')
  result.forkIsOther = fork.sandboxId !== id
  await forked.kill()

  result.paused = await bac.pause(id)
  result.pausedAgain = await bac.pause(id)
  await bac.resume(id, { timeoutMs: 60_000 })
  result.afterResume = (await sbx.commands.run('cat /home/user/state.txt')).stdout

  const following = (async () => {
    const kinds = []
    for await (const event of bac.followTrace(id)) kinds.push(event.kind)
    return kinds
  })()
  await sbx.kill()
  result.followedKinds = await following
} finally {
  await sbx.kill()
}
try {
  await new BacClient({ apiKey: 'bac_not_a_key' }).checkpoints(id)
} catch (err) {
  result.wrongKey = err.status
}
console.log(JSON.stringify(result))
