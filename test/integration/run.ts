// Runs the integration suite inside a real VS Code extension host: builds the extension, starts
// code-server with the smoke-test driver, and opens it in headless Chromium with the
// extensionDevelopmentPath / extensionTestsPath payload. The suite's exit code is ours.
// Two kruntimes cluster SIMULATORS (test/fixtures/cluster) run beside it, one per upstream era:
// era D (today's kruntimes: `operations:ws` only, no idle timeout) as context `simulator`, the
// current one, and era C (`operations:execute`/`operations:stream`, idle timeout) as context
// `simulator-era-c`. code-server — and so the extension host and the companion server — sees
// both through one KUBECONFIG (namespace `default`, Runtime `bash` in each).
// `npm run test:integration` (installs code-server and chromium on first use).
import * as esbuild from 'esbuild';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { format } from 'node:util';
import { chromium } from 'playwright-core';
import { z } from 'zod';
import { CHROMIUM_ARGS, REPO_ROOT, startCodeServer } from '../../scripts/vscodeHost';
import { type ClusterSimulator, startClusterSimulator } from '../fixtures/cluster/simulator';
import { startOpenSandboxSimulator } from '../fixtures/opensandbox/simulator';
import { serveRunnerBridge } from './runnerBridge';

// Per run (several runs may share a checkout); inside the repository so the suite finds its mocha.
fs.mkdirSync(path.join(REPO_ROOT, '.test-tmp'), { recursive: true });
const SUITE_OUT = fs.mkdtempSync(path.join(REPO_ROOT, '.test-tmp', 'integration-'));

function grepPattern(): string | undefined {
  const i = process.argv.indexOf('--grep');
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function buildAll(): Promise<string[]> {
  const { buildAll: buildBundles } = (await import(path.join(REPO_ROOT, 'esbuild.mjs'))) as { buildAll: () => Promise<unknown> };
  await buildBundles();
  fs.rmSync(SUITE_OUT, { recursive: true, force: true });
  const suiteDir = path.join(REPO_ROOT, 'test', 'integration', 'suite');
  const entries = fs.readdirSync(suiteDir).filter((f) => f.endsWith('.ts')).map((f) => path.join(suiteDir, f));
  await esbuild.build({
    entryPoints: entries,
    outdir: SUITE_OUT,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    sourcemap: 'inline',
    external: ['vscode', 'mocha'],
    logLevel: 'warning',
  });
  return entries.map((e) => path.basename(e, '.ts'));
}

/** The kubeconfig context of the era-C simulator (kruntimes.test.ts runs its flow on both). */
const ERA_C_CONTEXT = 'simulator-era-c';

const KubeconfigSchema = z.looseObject({
  clusters: z.array(z.object({ name: z.string(), cluster: z.looseObject({}) })),
  users: z.array(z.object({ name: z.string(), user: z.looseObject({}) })),
  contexts: z.array(z.object({ name: z.string(), context: z.object({ cluster: z.string(), user: z.string(), namespace: z.string().optional() }) })),
});

/**
 * One kubeconfig for code-server: everything of the era-D simulator's (its `simulator` context
 * stays current), plus the era-C simulator's admin context renamed `simulator-era-c`.
 */
function mergedKubeconfig(dir: string, eraD: ClusterSimulator, eraC: ClusterSimulator): string {
  const d = KubeconfigSchema.parse(JSON.parse(fs.readFileSync(eraD.kubeconfigPath, 'utf8')));
  const c = KubeconfigSchema.parse(JSON.parse(fs.readFileSync(eraC.kubeconfigPath, 'utf8')));
  const context = c.contexts.find((x) => x.name === 'simulator');
  const cluster = c.clusters.find((x) => x.name === context?.context.cluster);
  const user = c.users.find((x) => x.name === context?.context.user);
  if (!context || !cluster || !user) throw new Error(`the era-C simulator's kubeconfig has no complete 'simulator' context`);
  const merged = {
    ...d,
    clusters: [...d.clusters, { name: ERA_C_CONTEXT, cluster: cluster.cluster }],
    users: [...d.users, { name: ERA_C_CONTEXT, user: user.user }],
    contexts: [...d.contexts, { name: ERA_C_CONTEXT, context: { ...context.context, cluster: ERA_C_CONTEXT, user: ERA_C_CONTEXT } }],
  };
  const file = path.join(dir, 'kubeconfig');
  fs.writeFileSync(file, `${JSON.stringify(merged, null, 2)}\n`, { mode: 0o600 });
  return file;
}

async function main(): Promise<number> {
  // As on a person's machine: a PYTHONUNBUFFERED set here (some machines and CI images set it)
  // would pass to the sandboxes and hide that, with no tty, Python holds a server's "Serving HTTP
  // on …" line in its buffer — what the Sandbox terminal's own PYTHONUNBUFFERED=1 is for (ports.test.ts).
  delete process.env.PYTHONUNBUFFERED;
  const files = await buildAll();
  console.log(`integration suite: ${files.filter((f) => f !== 'index').join(', ')}`);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'sandbox-sessions-it-'));
  const stateDir = path.join(work, 'state');
  const dataDir = path.join(work, 'data');
  const folder = path.join(work, 'workspace');
  fs.mkdirSync(folder, { recursive: true });
  const cluster = await startClusterSimulator({ dir: path.join(work, 'cluster'), era: 'D', runtimes: [{ namespace: 'default', name: 'bash' }] });
  const clusterEraC = await startClusterSimulator({ dir: path.join(work, 'cluster-era-c'), era: 'C', runtimes: [{ namespace: 'default', name: 'bash' }] });
  const kubeconfig = mergedKubeconfig(work, cluster, clusterEraC);
  // An OpenSandbox SIMULATOR (test/fixtures/opensandbox): the suite configures it the way a person
  // does (the domain setting, the API key through "Set OpenSandbox API Key…"), so only the test sees these.
  const openSandbox = await startOpenSandboxSimulator();
  const server = await startCodeServer({
    workDir: work,
    extraArgs: ['--vscode-option', 'enable-smoke-test-driver'],
    env: {
      SANDBOX_SESSIONS_STATE_DIR: stateDir,
      XDG_DATA_HOME: dataDir,
      SANDBOX_SESSIONS_LOG_LEVEL: 'debug',
      SANDBOX_SESSIONS_IT_WORK: work,
      // `npm run test:integration -- --grep <pattern>` runs only the matching tests.
      ...(grepPattern() !== undefined ? { SANDBOX_SESSIONS_IT_GREP: grepPattern() } : {}),
      KUBECONFIG: kubeconfig,
      SANDBOX_SESSIONS_IT_OPENSANDBOX_DOMAIN: openSandbox.url,
      SANDBOX_SESSIONS_IT_OPENSANDBOX_KEY: openSandbox.apiKey ?? '',
      // What the suite asks of this runner (runnerBridge.ts): typing into an input box, the simulator's vault view.
      SANDBOX_SESSIONS_IT_BRIDGE: path.join(work, 'runner-bridge'),
      // Activations run the deterministic test agent (Maka's CLI contract) instead of `maka activate`.
      SANDBOX_SESSIONS_ACTIVATION_COMMAND: JSON.stringify([process.execPath, path.join(REPO_ROOT, 'test/fixtures/agent/agent.mts'), 'activate']),
    },
  });
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
  let exitCode: number;
  let stopBridge = (): void => undefined;
  try {
    const page = await browser.newPage();
    stopBridge = serveRunnerBridge(path.join(work, 'runner-bridge'), page, openSandbox);
    const done = new Promise<number>((resolve) => {
      void page.exposeFunction('codeAutomationExit', (code: number) => resolve(code));
    });
    // The workbench forwards every console line; keep the suite's and drop the workbench's own noise
    // (gallery and account lookups on a machine without network).
    const noise = /^\[(AgentHost[^\]]*|AccountPolicyGate|ChatModelSelection|Service Worker)\]|^Creating a socket|ENOTFOUND|^\s+at |open-vsx|marketplace/;
    await page.exposeFunction('codeAutomationLog', (type: string, args: unknown[]) => {
      const text = format(...(args as [unknown, ...unknown[]]));
      if (noise.test(text)) return;
      if (type === 'error') console.error(text);
      else console.log(text);
    });
    const remote = (p: string) => `vscode-remote://127.0.0.1:${server.port}${p}`;
    const payload = [
      ['extensionDevelopmentPath', remote(REPO_ROOT)],
      ['extensionTestsPath', remote(path.join(SUITE_OUT, 'index.js'))],
    ];
    await page.goto(`${server.url}/?folder=${encodeURIComponent(folder)}&payload=${encodeURIComponent(JSON.stringify(payload))}`);
    const timeout = new Promise<number>((resolve) =>
      setTimeout(() => {
        console.error('integration suite timed out after 10 minutes');
        resolve(1);
      }, 10 * 60_000).unref(),
    );
    exitCode = await Promise.race([done, timeout]);
    if (exitCode !== 0) {
      await page.screenshot({ path: path.join(work, 'failure.png') }).catch(() => undefined);
      console.error(`code-server log tail:\n${server.log().slice(-4000)}\n(work folder: ${work})`);
    }
  } finally {
    stopBridge();
    await browser.close().catch(() => undefined);
    await server.stop();
    fs.rmSync(SUITE_OUT, { recursive: true, force: true });
    await openSandbox.close().catch((err: unknown) => console.error(`stopping the OpenSandbox simulator: ${String(err)}`));
    for (const c of [cluster, clusterEraC]) {
      await c.stop().catch((err: unknown) => console.error(`stopping the era-${c.era} cluster simulator: ${String(err)}`));
    }
    // The companion server started a local gateway daemon for the suite: stop it.
    const state = path.join(stateDir, 'gateway.json');
    if (fs.existsSync(state)) {
      try {
        const { pid } = JSON.parse(fs.readFileSync(state, 'utf8')) as { pid: number };
        process.kill(pid, 'SIGTERM');
      } catch {
        // not running
      }
    }
  }
  return exitCode;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
