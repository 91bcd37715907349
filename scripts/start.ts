// `npm start`: build, start the local gateway, create a local sandbox, and open VS Code with the
// extension and that sandbox as the workspace folder — the desktop `code` when it is on PATH,
// otherwise code-server in the browser on 127.0.0.1 (URL and password printed). Ctrl+C stops the
// editor; the gateway and the sandbox keep running (`sandbox-sessions gateway --stop` ends them).
// Where things live (state root, repository, kubeconfig) is resolved here once and handed to the
// editor explicitly: code-server runs with a HOME of its own (server/locations.ts).
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type SandboxRef, sandboxFolderName, sandboxWorkspaceFile } from '../protocol/sandboxes';
import { ensureGateway } from '../server/gateway/daemonClient';
import { endpointPathOf, LocalGatewayClient } from '../server/gateway/localClient';
import { describeLocations, locationsEnv, resolveLocations } from '../server/locations';
import { packageExtension, REPO_ROOT } from './packageExtension';
import { startCodeServer } from './vscodeHost';

function onPath(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function main(): Promise<void> {
  console.log('building and packaging the extension…');
  const vsix = packageExtension();
  const locations = resolveLocations();
  for (const line of describeLocations(locations)) console.log(line);
  const gateway = await ensureGateway({ stateDir: locations.stateDir, command: [process.execPath, path.join(REPO_ROOT, 'dist/server.js'), 'gateway'] });
  const api = new LocalGatewayClient(gateway.url, gateway.token);
  const created = await api.createRun('default', {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Run',
    metadata: { generateName: 'sbx-', namespace: 'default' },
    spec: { runtime: 'process', mode: { session: { idleTimeoutSeconds: 3600 } } },
  });
  const run = await api.waitPhase('default', created.metadata.name ?? '', ['Ready']);
  const name = run.metadata.name ?? '';
  if (run.status?.phase !== 'Ready') throw new Error(`the sandbox ${name} did not become Ready: ${run.status?.message ?? run.status?.phase}`);
  await api.execute(endpointPathOf(run), {
    writeFile: {
      path: 'README.md',
      contents: Buffer.from(
        `# ${name}\n\nA local sandbox (backend: process, no isolation). Open a terminal with "Sandbox Sessions: Open Terminal",\n` +
          'and close it with "Sandbox Sessions: Close Sandbox (Drain)" to export what you put in $KRUNTIME_ARTIFACTS_DIR.\n',
      ).toString('base64'),
    },
  });
  const ref: SandboxRef = { provider: 'local', context: 'local', namespace: 'default', name };
  console.log(`sandbox ${name} is Ready (gateway ${gateway.url}, pid ${gateway.pid})`);

  const dataHome = process.env.XDG_DATA_HOME && path.isAbsolute(process.env.XDG_DATA_HOME) ? process.env.XDG_DATA_HOME : path.join(os.homedir(), '.local', 'share');
  const editorHome = path.join(dataHome, 'sandbox-sessions', 'code-server');
  // The window opens a workspace file so that its folder is named after the sandbox (its root path is `/`).
  const workspaceFile = path.join(editorHome, 'workspaces', `${sandboxFolderName(ref)}.code-workspace`);
  fs.mkdirSync(path.dirname(workspaceFile), { recursive: true, mode: 0o700 });
  fs.writeFileSync(workspaceFile, sandboxWorkspaceFile(ref), { mode: 0o600 });
  const editorEnv = { ...process.env, ...locationsEnv(locations) };

  if (onPath('code')) {
    console.log(`opening VS Code on ${sandboxFolderName(ref)}…`);
    spawn('code', ['--extensionDevelopmentPath', REPO_ROOT, workspaceFile], { stdio: 'inherit', detached: true, env: editorEnv }).unref();
    return;
  }
  const password = randomBytes(12).toString('base64url');
  console.log('no desktop `code` on PATH: starting code-server (installed into .vscode-host/ on first use)…');
  const server = await startCodeServer({ workDir: editorHome, installVsix: vsix, password, keepSettings: true, env: locationsEnv(locations) });
  console.log(`\nopen ${server.url}/?workspace=${encodeURIComponent(workspaceFile)}\npassword: ${password}\n(Ctrl+C stops code-server; the sandbox keeps running)`);
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    console.log('stopping code-server…');
    void server.stop().then(() => {
      console.log(`code-server stopped; sandbox ${name} keeps running (bin/sandbox-sessions sandbox close ${name} ends it)`);
      process.exit(0);
    });
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((err: unknown) => {
  console.error(`npm start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
