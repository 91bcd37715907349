// Port forwarding in a real VS Code: `python3 -m http.server PORT` started in a Sandbox terminal prints
// its address, the terminal offers it as a link, following it forwards the port, the Ports section
// shows it, and the forwarded address answers with the sandbox's files — on a local sandbox (whose
// server already listens on this machine) and on the cluster SIMULATOR's kruntimes sandbox
// (through a pods/portforward; stopping the forward closes the address). A forward ends with its
// sandbox, and a sandbox that ended is refused.
import assert from 'node:assert/strict';
import net from 'node:net';
import * as vscode from 'vscode';
import { PortForwards } from '../../../extension/ports/portForwards';
import type { PortForward } from '../../../protocol/ports';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { accepts, freePort } from '../../fixtures/loopback';
import { api, newLocalSandbox, plain, until } from './helpers';

/** A Sandbox terminal serving the sandbox's folder on `port`, and the link it offers for the printed address. */
async function serveInTerminal(sandbox: SandboxSummary, port: number) {
  const exported = await api();
  const terminal = await vscode.commands.executeCommand<vscode.Terminal | undefined>('sandboxSessions.openTerminal', sandbox.key);
  assert.ok(terminal, 'a terminal was opened');
  const screen = () => plain(exported.terminalTranscript(terminal) ?? '');
  await until(() => screen().includes(`${sandbox.ref.name}:/$ `), 'the prompt', 30_000);
  const prompts = () => screen().split(`\n${sandbox.ref.name}:`).length - 1;
  const before = prompts();
  terminal.sendText('echo served-file > hello.txt', true);
  await until(() => prompts() > before, 'the prompt after writing the file', 30_000);
  // As a person types it: no -u, no --bind (the terminal sets PYTHONUNBUFFERED=1, so the line shows
  // without a tty; run.ts keeps the machine's own PYTHONUNBUFFERED out). A free port rather than
  // 8000: the sandboxes share this machine's network with every other test run on it.
  terminal.sendText(`python3 -m http.server ${port}`, true);
  const printed = `(http://0.0.0.0:${port}/)`;
  await until(() => screen().includes(printed), 'the server to print its address', 30_000);
  const line = screen().split(/\r?\n/).find((l) => l.includes(printed)) ?? '';
  const links = exported.ports.links.provideTerminalLinks({ terminal, line });
  const link = links.find((l) => l.port === port);
  assert.ok(link, `a link for port ${port} in ${JSON.stringify(line)}`);
  assert.match(String(link.tooltip), new RegExp(`Forward port ${port} of sandbox ${sandbox.ref.name}`));
  return { terminal, link, screen };
}

/** A Memento in memory: the workspaceState of a window that reloads (both windows see the same one). */
function memoryMemento(): vscode.Memento {
  const values = new Map<string, unknown>();
  return {
    keys: () => [...values.keys()],
    get: <T>(key: string, fallback?: T) => (values.has(key) ? (values.get(key) as T) : fallback),
    update: async (key: string, value: unknown) => void values.set(key, value),
  } as vscode.Memento;
}

/**
 * A window that reloads: its companion server exits, and every forward with it (here: stopped behind the first
 * window's back); the next window's PortForwards, on the same workspaceState, forwards the port again — on the
 * same local port, or on a free one when that is taken now. A sandbox that has ended gets none back.
 */
async function forwardsAgainAfterReload(sandbox: SandboxSummary, port: number): Promise<void> {
  const { companion, registry } = await api();
  const log = vscode.window.createOutputChannel('Sandbox Sessions port test', { log: true });
  const state = memoryMemento();
  const first = new PortForwards(companion, registry, log, state);
  const before = await first.forward(sandbox.key, port);
  await companion.request('ports/stop', { id: before.id }); // what the server's exit does to it
  assert.equal(await accepts(before.localPort), false);
  const second = new PortForwards(companion, registry, log, state);
  const [again] = await second.restore();
  assert.ok(again, 'the forward is made again');
  assert.equal(again.localPort, before.localPort, 'on the same local port');
  assert.equal((await fetch(again.url)).status, 200, 'and it answers');
  assert.deepEqual(second.all().map((f) => f.id), [again.id]);
  // The next reload finds that local port taken by another program: a free one is used.
  await companion.request('ports/stop', { id: again.id });
  const squatter = net.createServer();
  await new Promise<void>((resolve) => squatter.listen(before.localPort, '127.0.0.1', resolve));
  try {
    const third = new PortForwards(companion, registry, log, state);
    const [moved] = await third.restore();
    assert.ok(moved, 'forwarded on another port');
    assert.notEqual(moved.localPort, before.localPort);
    assert.equal((await fetch(moved.url)).status, 200);
    assert.deepEqual(third.rememberedForwards().map((r) => r.localPort), [moved.localPort]);
    await third.stop(moved);
    assert.deepEqual(third.rememberedForwards(), []);
  } finally {
    squatter.close();
    log.dispose();
  }
}

/** The forwards the Ports section shows, as VS Code asks its tree. */
async function portNodes(): Promise<PortForward[]> {
  const { tree } = (await api()).ports;
  const out: PortForward[] = [];
  for (const s of tree.getChildren()) for (const p of tree.getChildren(s)) if (p.kind === 'port') out.push(p.forward);
  return out;
}

describe('Port forwarding', () => {
  it('local sandbox: the address python3 -m http.server prints is offered, forwarded and answers; it ends with the sandbox', async () => {
    const exported = await api();
    const sandbox = await newLocalSandbox();
    const port = await freePort();
    const { terminal, link } = await serveInTerminal(sandbox, port);
    try {
      const forward = await exported.ports.links.forwardLink(link);
      assert.equal(forward.via, 'host');
      assert.equal(forward.localHost, '127.0.0.1');
      assert.equal(forward.localPort, port);
      assert.match(forward.message, /already listens on this machine/);
      const res = await fetch(forward.url);
      assert.equal(res.status, 200);
      assert.match(await res.text(), /hello\.txt/);
      const shown = (await portNodes()).find((f) => f.id === forward.id);
      assert.ok(shown, 'the Ports section shows the forward');
      const item = exported.ports.tree.getTreeItem({ kind: 'port', forward });
      assert.equal(item.description, `127.0.0.1:${port} (listens here)`);
      terminal.sendText('\x03', false);
      await exported.companion.request('sandboxes/terminate', { ref: sandbox.ref, mode: 'Immediate', wait: true });
      await until(() => !exported.ports.forwards.all().some((f) => f.id === forward.id), 'the forward to end with its sandbox', 20_000);
      await assert.rejects(exported.companion.request('ports/forward', { ref: sandbox.ref, port }), /has ended \(Cancelled\)/);
    } finally {
      terminal.dispose();
    }
  });

  it('kruntimes sandbox (simulator): the printed address is forwarded through the API server, answers, and stops answering once stopped', async () => {
    const exported = await api();
    const sandbox = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.newSandbox', {
      provider: 'kruntimes',
      context: 'simulator',
      namespace: 'default',
      runtime: 'bash',
      open: false,
    });
    assert.ok(sandbox, 'New Sandbox returned the sandbox');
    const port = await freePort();
    const { terminal, link, screen } = await serveInTerminal(sandbox, port);
    try {
      const forward = await exported.ports.links.forwardLink(link);
      assert.equal(forward.via, 'port-forward');
      assert.equal(forward.localHost, '127.0.0.1');
      assert.notEqual(forward.localPort, port);
      const res = await fetch(forward.url);
      assert.equal(res.status, 200);
      assert.match(await res.text(), /hello\.txt/);
      // The request reached the sandbox's server (its log line in the terminal).
      await until(() => /"GET \/ HTTP\/1\.1" 200/.test(screen()), 'the server to log the request');
      assert.ok((await portNodes()).some((f) => f.id === forward.id), 'the Ports section shows the forward');
      const remembered = { key: sandbox.key, sandboxPort: port, localPort: forward.localPort, via: 'port-forward' };
      assert.deepEqual(exported.ports.forwards.rememberedForwards(), [remembered], 'the window remembers it for a reload');
      await vscode.commands.executeCommand('sandboxSessions.stopForwardedPort', { kind: 'port', forward });
      assert.equal(exported.ports.forwards.all().some((f) => f.id === forward.id), false);
      assert.deepEqual(exported.ports.forwards.rememberedForwards(), [], 'a stopped forward is not forwarded again after a reload');
      assert.equal(await accepts(forward.localPort), false, 'the forwarded address stops answering');
      await forwardsAgainAfterReload(sandbox, port);
      terminal.sendText('\x03', false);
      await exported.companion.request('sandboxes/terminate', { ref: sandbox.ref, mode: 'Immediate', wait: true });
      await assert.rejects(exported.companion.request('ports/forward', { ref: sandbox.ref, port }), /has ended \(Cancelled\): nothing runs in it/);
    } finally {
      terminal.dispose();
    }
  });
});
