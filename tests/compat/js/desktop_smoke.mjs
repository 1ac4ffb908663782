// Smoke scenario with the official @e2b/desktop JavaScript SDK against Bac; configuration
// comes only from the environment (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY). Prints one
// JSON line of results.
import { Sandbox } from '@e2b/desktop'

const desktop = await Sandbox.create({ timeoutMs: 120_000 })
const result = { sandboxId: desktop.sandboxId }
try {
  const png = await desktop.screenshot()
  result.pngSignature = Buffer.from(png.slice(0, 8)).toString('hex')
  result.pngBytes = png.length
  result.screen = await desktop.getScreenSize()
  await desktop.moveMouse(100, 200)
  result.cursor = await desktop.getCursorPosition()
  result.user = (await desktop.commands.run('whoami')).stdout.trim()
} finally {
  await desktop.kill()
}
console.log(JSON.stringify(result))
