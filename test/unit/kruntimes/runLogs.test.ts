// runtimed's log of a kruntimes sandbox, read through the provider as the upstream SDKs' `Logs()`
// read it — the assigned Runtime Pod's `runtimed` container log (pods/log), kept to the Run's own
// lines by `run_uid` — against the cluster SIMULATOR, whose Runtime Pod log holds runtimed's own
// line and the lines of every Run on the Pod: the audit line of every operation kind and outcome
// (the same check table as the local runtime's, test/fixtures/runtimedAudit.ts), `tailLines` and
// `sinceTime` over the Run's lines, follow within a second and ending with the Run, the RBAC
// refusal in words, `sandbox-sessions kruntimes logs NAME -f --tail N`, and a real kubectl
// reading the same Pod log.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { GatewayError } from '../../../protocol/kruntimes/gatewayErrors';
import type { Run } from '../../../protocol/kruntimes/run';
import type { SandboxRef } from '../../../protocol/sandboxes';
import { runKruntimesCommand } from '../../../server/cli/kruntimes';
import type { KruntimesSandboxProvider } from '../../../server/sandboxes/kruntimes/kruntimesProvider';
import { SandboxError } from '../../../server/sandboxes/provider';
import { captureIo } from '../../fixtures/cliCapture';
import { findKubectl, Kubectl } from '../../fixtures/cluster/kubectl';
import { type ClusterTarget, simulatorOnly, startClusterTarget, wantsRealCluster } from '../../fixtures/cluster/target';
import { assertEveryKindAndOutcome, type Line, runEveryKindAndOutcome } from '../../fixtures/runtimedAudit';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves once `pred` holds, checking after each change `changed` reports; rejects after `ms` with `what`. */
function until(what: string, pred: () => boolean, changed: Set<() => void>, ms = 10_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (!pred()) return;
      clearTimeout(timer);
      changed.delete(check);
      resolve();
    };
    const timer = setTimeout(() => {
      changed.delete(check);
      reject(new Error(`no ${what} within ${ms} ms`));
    }, ms);
    changed.add(check);
    check();
  });
}

describe('kruntimes provider: runtimed log of a Run, from its Runtime Pod', function () {
  this.timeout(120_000);
  let target: ClusterTarget;
  let provider: KruntimesSandboxProvider;
  /** Sandbox A runs one command and stays open: its lines share the Pod log with B's. */
  let a: { ref: SandboxRef; gw: GatewayClient };
  let b: { ref: SandboxRef; gw: GatewayClient; run: Run; expected: Line[] };

  const open = async (name: string) => {
    const s = await provider.create(target.spec({ name }), { waitForReady: true });
    const c = await provider.open(s.ref);
    return { ref: s.ref, gw: new GatewayClient({ endpoint: c.endpoint, token: c.token, tls: c.tls }) };
  };
  const read = async (ref: SandboxRef, query: Parameters<KruntimesSandboxProvider['logs']>[1] = {}) => {
    const lines: string[] = [];
    await provider.logs(ref, query, (l) => lines.push(l));
    return lines;
  };
  const json = (lines: string[]) => lines.map((l) => JSON.parse(l) as Line);
  /** Resolves once `file` exists in the sandbox (a command's first step writes it: the command runs). */
  async function fileAppears(gw: GatewayClient, file: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const found = await gw.read(file).then(
        () => true,
        (e: unknown) => {
          if (e instanceof GatewayError && e.status === 404) return false;
          throw e;
        },
      );
      if (found) return;
      assert.ok(Date.now() < deadline, `${file} did not appear: the command did not start`);
      await sleep(50);
    }
  }

  before(async () => {
    target = await startClusterTarget();
    provider = target.provider();
    a = await open('log-a');
    assert.equal((await a.gw.runCommand({ shell: 'echo from-a' })).exitCode, 0);
    const opened = await open('log-b');
    const expected = await runEveryKindAndOutcome({
      cancelledBy: 'connection',
      execute: (op) =>
        opened.gw.execute(op).then(
          () => 200,
          (e: unknown) => {
            if (e instanceof GatewayError) return e.status;
            throw e;
          },
        ),
      cancelRunningCommand: async () => {
        const stop = new AbortController();
        const running = opened.gw.runCommand({ shell: ': > cancel-started; exec sleep 600' }, { signal: stop.signal }).then(
          () => 'answered',
          () => 'cancelled',
        );
        await fileAppears(opened.gw, 'cancel-started');
        stop.abort();
        assert.equal(await running, 'cancelled');
      },
    });
    b = { ...opened, run: (await provider.get(opened.ref)).run, expected };
  });
  after(async () => {
    await a?.gw.close();
    await b?.gw.close();
    await target?.stop();
  });

  it('the audit line of every operation kind and outcome (a cancelled and a timed-out command) — only the Run’s lines of the shared Pod log', async () => {
    // One operation at a time: each line is written before the next operation runs.
    const lines = json(await read(b.ref));
    assertEveryKindAndOutcome(lines, b.run, b.expected);
    assert.ok(lines.every((l) => l.run_uid === b.run.metadata.uid), 'only B’s lines');
    assert.equal(b.run.status?.assignedPod, (await provider.get(a.ref)).run.status?.assignedPod, 'A and B share one Runtime Pod');
    const aLines = json(await read(a.ref));
    assert.deepEqual(
      aLines.map((l) => [l.stream, l.message]),
      [
        ['stdout', 'from-a'],
        ['audit', 'session operation completed'],
      ],
    );
  });

  it('tailLines counts the Run’s lines, sinceTime keeps lines at or after it, timestamps prefix the kubelet’s stamp', async () => {
    const all = await read(b.ref, { timestamps: true });
    assert.ok(all.length > 10, `${all.length} lines`);
    for (const l of all) assert.match(l, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z \{"run_uid":/);
    const plain = all.map((l) => l.slice(l.indexOf(' ') + 1));
    const stamps = all.map((l) => l.slice(0, l.indexOf(' ')));
    assert.deepEqual(await read(b.ref), plain);
    // A's lines came before B's on the Pod, and other Runs' lines never count towards the tail.
    assert.deepEqual(await read(b.ref, { tailLines: 2 }), plain.slice(-2));
    assert.deepEqual(await read(b.ref, { tailLines: 0 }), []);
    assert.deepEqual(await read(b.ref, { tailLines: 10_000 }), plain);
    assert.deepEqual(await read(b.ref, { sinceTime: stamps[5] as string }), plain.slice(5));
    assert.deepEqual(await read(b.ref, { tailLines: 3, sinceTime: stamps[all.length - 2] as string }), plain.slice(-2));
    assert.deepEqual(await read(b.ref, { sinceTime: new Date(Date.now() + 60_000).toISOString() }), []);
    assert.deepEqual(await read(b.ref, { sinceSeconds: 3600 }), plain);
  });

  it('a user without `get` on pods/log is told what is missing', async function () {
    simulatorOnly(() => target, this, 'needs the simulator’s viewer context');
    await assert.rejects(read({ ...b.ref, context: 'simulator-viewer' }), (e: unknown) => {
      assert.ok(e instanceof SandboxError, String(e));
      assert.equal(e.code, 'cluster_forbidden');
      assert.match(e.message, /simulator-viewer may not read the log of Runtime Pod default\/runtime-bash-0/);
      assert.match(e.message, /"get" on "pods\/log" in namespace default/);
      return true;
    });
  });

  it('a real kubectl reads the same Pod log: every Run’s lines and runtimed’s own, --tail, --timestamps, --since-time', async function () {
    const sim = simulatorOnly(() => target, this, 'uses the simulator’s kubeconfig');
    const binary = findKubectl();
    assert.ok(binary, 'no kubectl: run scripts/install-test-deps.sh or set KUBECTL');
    fs.mkdirSync(path.join(target.dir, 'kubectl-home'), { recursive: true });
    const kubectl = new Kubectl(binary, sim.kubeconfigPath, path.join(target.dir, 'kubectl-home'));
    const pod = b.run.status?.assignedPod ?? '';
    const whole = await kubectl.run(['logs', '-n', 'default', pod]);
    assert.equal(whole.code, 0, whole.stderr);
    const podLines = whole.stdout.split('\n').filter(Boolean);
    assert.match(podLines[0] as string, /"msg":"runtimed started"/, 'runtimed’s own line, which no Run’s filter keeps');
    const aUid = (await provider.get(a.ref)).run.metadata.uid;
    assert.ok(podLines.some((l) => l.includes(`"run_uid":"${aUid}"`)), 'A’s lines');
    const mine = await read(b.ref);
    assert.deepEqual(podLines.filter((l) => l.includes(`"run_uid":"${b.run.metadata.uid}"`)), mine, 'the provider keeps exactly B’s lines');
    const tail = await kubectl.run(['logs', '-n', 'default', pod, '--tail=2', '--timestamps', '-c', 'runtimed']);
    assert.equal(tail.code, 0, tail.stderr);
    const tailLines = tail.stdout.split('\n').filter(Boolean);
    assert.deepEqual(tailLines.map((l) => l.slice(l.indexOf(' ') + 1)), podLines.slice(-2));
    const since = await kubectl.run(['logs', '-n', 'default', pod, `--since-time=${new Date(Date.now() + 3_600_000).toISOString()}`]);
    assert.equal(since.code, 0, since.stderr);
    assert.equal(since.stdout, '');
    const denied = await kubectl.run(['logs', '-n', 'default', pod, '--context', 'simulator-viewer']);
    assert.notEqual(denied.code, 0);
    assert.match(denied.stderr, /forbidden/);
  });

  it('follow delivers a new line within a second, then `kruntimes logs NAME -f --tail N` follows until the Run ends', async () => {
    const lines: string[] = [];
    const changed = new Set<() => void>();
    const stop = new AbortController();
    const following = provider.logs(b.ref, { follow: true, tailLines: 1 }, (l) => {
      lines.push(l);
      for (const c of changed) c();
    }, stop.signal);
    try {
      await until('tail line', () => lines.length >= 1, changed);
      assert.equal(lines.length, 1, 'tailLines=1 applies to the backlog');
      const delays: number[] = [];
      for (const i of [1, 2, 3]) {
        const sent = performance.now();
        await b.gw.writeFile(`follow-${i}.txt`, Buffer.from('x'));
        await until(`write ${i}'s audit line`, () => lines.filter((l) => l.includes('"write_file"')).length >= i, changed);
        delays.push(performance.now() - sent);
      }
      console.log(`      follow (kruntimes): write → line delivered in ${delays.map((d) => d.toFixed(1)).join(', ')} ms`);
      for (const d of delays) assert.ok(d < 1000, `delivered in ${d} ms`);
    } finally {
      stop.abort();
    }
    await following;

    const env = wantsRealCluster() ? { ...process.env } : { KUBECONFIG: target.kubeconfigPath, HOME: target.dir };
    const io = captureIo();
    const cli = runKruntimesCommand(['logs', b.ref.name, '-f', '--tail', '2', '--context', target.context, '--namespace', target.namespace], io.io, { env });
    const seen = new Set<() => void>();
    const poll = setInterval(() => {
      for (const c of seen) c();
    }, 20);
    try {
      await until('the CLI’s tail', () => io.out().split('\n').filter(Boolean).length >= 2, seen);
      assert.deepEqual(io.out().split('\n').filter(Boolean), lines.slice(-2), 'the last two lines of the Run');
      await b.gw.runCommand({ shell: 'echo cli-followed' });
      await until('the followed line', () => io.out().includes('"message":"cli-followed"'), seen);
      await provider.terminate(b.ref, 'Immediate', { wait: true });
      assert.equal(await cli, 0, io.err());
    } finally {
      clearInterval(poll);
    }
  });
});
