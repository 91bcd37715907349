// The suite's side of the runner bridge (../runnerBridge.ts): asks the runner, which drives the browser page and owns
// the OpenSandbox simulator, to do what the extension host cannot — type into the open input box, read a sandbox's
// vault server side — and waits for its answer.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { until } from './helpers';

async function ask<T>(request: Record<string, unknown>, timeoutMs = 30_000): Promise<T> {
  const dir = process.env.SANDBOX_SESSIONS_IT_BRIDGE;
  if (!dir) throw new Error('SANDBOX_SESSIONS_IT_BRIDGE is not set for the extension host (run the suite with npm run test:integration)');
  const id = randomUUID();
  const tmp = path.join(dir, `${id}.tmp`);
  fs.writeFileSync(tmp, JSON.stringify(request), { mode: 0o600 });
  fs.renameSync(tmp, path.join(dir, `${id}.request.json`)); // whole, or not at all, when the runner looks
  const response = path.join(dir, `${id}.response.json`);
  await until(() => fs.existsSync(response), `the runner to answer ${String(request.op)}`, timeoutMs);
  const answer = JSON.parse(fs.readFileSync(response, 'utf8')) as { ok: true; result: T } | { ok: false; error: string };
  fs.rmSync(response, { force: true });
  if (!answer.ok) throw new Error(`the runner could not ${String(request.op)}: ${answer.error}`);
  return answer.result;
}

/** Types `text` into the input box VS Code shows (waiting until it is visible) and presses Enter, as a person does. */
export async function typeIntoQuickInput(text: string, options: { password: boolean }): Promise<void> {
  await ask({ op: 'typeIntoQuickInput', text, password: options.password });
}

/** The simulator's server-side view of an OpenSandbox sandbox's Credential Vault. */
export function openSandboxVault(sandboxId: string, url: string): Promise<{ vaultSecrets: { name: string; value: string }[]; injectedHeaders: Record<string, string> }> {
  return ask({ op: 'openSandboxVault', sandboxId, url });
}
