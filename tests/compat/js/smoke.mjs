// Smoke scenario with the official e2b JavaScript SDK; configuration comes only from the
// environment (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY). Prints one JSON line of results.
import { Sandbox } from 'e2b'

const sbx = await Sandbox.create({ timeoutMs: 60_000, metadata: { sdk: 'js' } })
const result = { sandboxId: sbx.sandboxId }
try {
  const run = await sbx.commands.run('echo from-js; whoami')
  result.stdout = run.stdout
  result.exitCode = run.exitCode
  await sbx.files.write('/home/user/js.txt', 'written by js')
  result.file = await sbx.files.read('/home/user/js.txt')
  const info = await sbx.getInfo()
  result.metadata = info.metadata
  result.runningBeforeKill = await sbx.isRunning()
} finally {
  await sbx.kill()
}
result.runningAfterKill = await sbx.isRunning()
console.log(JSON.stringify(result))
