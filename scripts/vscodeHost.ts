// Starts a real VS Code — code-server from the npm registry, installed by
// scripts/install-vscode-host.sh into .vscode-host/ — on a loopback port with its own HOME,
// user-data and extensions folders, and stops its whole process group afterwards. Used by the
// integration and e2e tests and by `npm start`.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const REPO_ROOT = path.resolve(__dirname, '..');

export interface CodeServer {
  url: string;
  port: number;
  home: string;
  userDataDir: string;
  extensionsDir: string;
  log(): string;
  stop(): Promise<void>;
}

/** Installs the host if needed and returns [node, entry.js]. */
export function installHost(): { node: string; entry: string } {
  const out = execFileSync('bash', [path.join(REPO_ROOT, 'scripts/install-vscode-host.sh'), '--print'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [node, entry] = out.trim().split('\n').slice(-2);
  if (!node || !entry || !fs.existsSync(node) || !fs.existsSync(entry)) throw new Error(`VS Code host not installed:\n${out}`);
  return { node, entry };
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

export interface StartOptions {
  env?: NodeJS.ProcessEnv;
  extraArgs?: string[];
  /** Where HOME, user data and extensions live (default: a new temp folder). */
  workDir?: string;
  installVsix?: string;
  /** Require this password (default: none — only for tests on a private loopback port). */
  password?: string;
  /** Keep the user's settings between runs (default: the test settings are written). */
  keepSettings?: boolean;
  /**
   * Enable this extension's proposed APIs (package.json `enabledApiProposals`: the file and text
   * search providers that let Quick Open and Find in Files search sandbox folders). Default true.
   * code-server 4.139.1's web workbench enables proposals for every extension anyway; the flag is
   * what desktop `code` and other builds need.
   */
  proposedApi?: boolean;
}

/** `publisher.name` of this extension, as `--enable-proposed-api` names it. */
export function extensionId(): string {
  const manifest = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { publisher: string; name: string };
  return `${manifest.publisher}.${manifest.name}`;
}

export async function startCodeServer(options: StartOptions = {}): Promise<CodeServer> {
  const { node, entry } = installHost();
  const work = options.workDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'sandbox-sessions-vscode-'));
  const home = path.join(work, 'home');
  const userDataDir = path.join(work, 'user-data');
  const extensionsDir = path.join(work, 'extensions');
  for (const d of [home, userDataDir, extensionsDir]) fs.mkdirSync(d, { recursive: true });
  // Installed before the server starts: a running code-server does not pick up new extensions.
  if (options.installVsix) installExtension(options.installVsix, extensionsDir, userDataDir);
  const port = await freePort();
  const config = path.join(work, 'config.yaml');
  const auth = options.password ? `auth: password\npassword: ${options.password}\n` : 'auth: none\n';
  fs.writeFileSync(config, `bind-addr: 127.0.0.1:${port}\n${auth}cert: false\n`, { mode: 0o600 });
  fs.mkdirSync(path.join(userDataDir, 'User'), { recursive: true });
  const settings = path.join(userDataDir, 'User', 'settings.json');
  if (!options.keepSettings || !fs.existsSync(settings)) fs.writeFileSync(
    settings,
    JSON.stringify({
      'workbench.startupEditor': 'none',
      'terminal.integrated.gpuAcceleration': 'off',
      'extensions.autoUpdate': false,
      'security.workspace.trust.enabled': false,
      'telemetry.telemetryLevel': 'off',
      'workbench.tips.enabled': false,
    }),
  );
  let log = '';
  const child: ChildProcess = spawn(
    node,
    [
      entry,
      '--config',
      config,
      '--user-data-dir',
      userDataDir,
      '--extensions-dir',
      extensionsDir,
      '--disable-telemetry',
      '--disable-update-check',
      '--disable-workspace-trust',
      ...(options.proposedApi === false ? [] : ['--enable-proposed-api', extensionId()]),
      ...(options.extraArgs ?? []),
    ],
    { detached: true, env: { ...process.env, HOME: home, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout?.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (log += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null) throw new Error(`code-server exited (${child.exitCode}):\n${log}`);
    if (Date.now() > deadline) throw new Error(`code-server did not become healthy in 60 s:\n${log}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    port,
    home,
    userDataDir,
    extensionsDir,
    log: () => log,
    stop: async () => {
      if (child.pid !== undefined && child.exitCode === null) {
        try {
          process.kill(-child.pid, 'SIGTERM');
        } catch {
          // already gone
        }
        const gone = new Promise<void>((r) => child.once('exit', () => r()));
        const timer = setTimeout(() => {
          try {
            process.kill(-child.pid!, 'SIGKILL');
          } catch {
            // already gone
          }
        }, 5000);
        await gone;
        clearTimeout(timer);
      }
    },
  };
}

/** Headless Chromium flags that work on these machines (as root, closed network). */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-dev-shm-usage',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Installs a packaged extension into an extensions folder with code-server's own CLI. */
export function installExtension(vsix: string, extensionsDir: string, userDataDir: string): void {
  const { node, entry } = installHost();
  execFileSync(node, [entry, '--extensions-dir', extensionsDir, '--user-data-dir', userDataDir, '--install-extension', vsix], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}
