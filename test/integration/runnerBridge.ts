// The runner's side of the integration suite's bridge: what a test inside the extension host cannot do itself, the
// runner (run.ts) does for it — type into the workbench's open input box as a person does (Playwright keyboard on
// the real page: the `type` command reaches only text editors), and read the OpenSandbox simulator's server-side
// view of a sandbox's Credential Vault (values the vault's API never gives back). Requests are files
// `<id>.request.json` in a directory both sides see; the answer is `<id>.response.json`. Files, not console lines:
// a typed secret must not pass through a log.
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { z } from 'zod';
import type { OpenSandboxSimulator } from '../fixtures/opensandbox/simulator';

const RequestSchema = z.discriminatedUnion('op', [
  /** Types `text` into the quick input's box once it is visible (a password box if `password`), then Enter. */
  z.strictObject({ op: z.literal('typeIntoQuickInput'), text: z.string(), password: z.boolean() }),
  /** Sandbox `sandboxId`'s vault values and the headers its credential proxy would add to a request to `url`. */
  z.strictObject({ op: z.literal('openSandboxVault'), sandboxId: z.string(), url: z.string() }),
]);
type BridgeRequest = z.infer<typeof RequestSchema>;

async function answer(req: BridgeRequest, page: Page, openSandbox: OpenSandboxSimulator): Promise<unknown> {
  if (req.op === 'openSandboxVault') {
    return { vaultSecrets: openSandbox.inspect(req.sandboxId).vaultSecrets, injectedHeaders: openSandbox.injectedHeaders(req.sandboxId, req.url) };
  }
  const box = page.locator(`.quick-input-widget .quick-input-box input${req.password ? '[type="password"]' : ''}`);
  await box.waitFor({ state: 'visible', timeout: 15_000 });
  await box.pressSequentially(req.text);
  await box.press('Enter');
  return { typed: true };
}

/** Serves the bridge in `dir` until the returned function is called. */
export function serveRunnerBridge(dir: string, page: Page, openSandbox: OpenSandboxSimulator): () => void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const busy = new Set<string>();
  const poll = setInterval(() => {
    for (const file of fs.readdirSync(dir)) {
      const m = /^([A-Za-z0-9-]+)\.request\.json$/.exec(file);
      if (!m || busy.has(file)) continue;
      busy.add(file);
      const id = m[1] as string;
      const reply = (body: unknown) => {
        fs.writeFileSync(path.join(dir, `${id}.response.json.tmp`), JSON.stringify(body), { mode: 0o600 });
        fs.renameSync(path.join(dir, `${id}.response.json.tmp`), path.join(dir, `${id}.response.json`));
        fs.rmSync(path.join(dir, file), { force: true });
        busy.delete(file);
      };
      Promise.resolve()
        .then(() => answer(RequestSchema.parse(JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'))), page, openSandbox))
        .then(
          (result) => reply({ ok: true, result }),
          (err: unknown) => reply({ ok: false, error: err instanceof Error ? err.message : String(err) }),
        );
    }
  }, 50);
  return () => clearInterval(poll);
}
