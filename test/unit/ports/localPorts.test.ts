// Port forwarding decisions for local sandboxes: a `process` or `bubblewrap` sandbox's server
// already listens on this machine (answered with its own address), nothing listening or a
// non-loopback bind is refused in words, and — for real, under bubblewrap — a server started
// with isolateNetwork is refused with the reason, while the same server without it is reached.
import assert from 'node:assert/strict';
import net from 'node:net';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { CompanionError } from '../../../protocol/companion';
import type { Run } from '../../../protocol/kruntimes/run';
import { LOCAL_CONTEXT, type SandboxRef, sandboxKey } from '../../../protocol/sandboxes';
import { decideLocalReach } from '../../../server/ports/localReach';
import { hostListeningPorts, LocalPortSubstrate } from '../../../server/ports/localPorts';
import type { SandboxProvider } from '../../../server/sandboxes/provider';
import { readyRun, startTestGateway, type TestGateway } from '../gateway/harness';

const listening = (port: number, address: string) => [{ port, address, family: address.includes(':') ? ('ipv6' as const) : ('ipv4' as const) }];

describe('ports: local sandboxes', function () {
  this.timeout(60_000);

  describe('decisions', () => {
    it('process and bubblewrap: a server on a wildcard or loopback address is reached at its own address', () => {
      for (const backend of ['process', 'bubblewrap']) {
        for (const [address, host] of [
          ['0.0.0.0', '127.0.0.1'],
          ['127.0.0.1', '127.0.0.1'],
          ['::', '127.0.0.1'],
          ['::1', '::1'],
        ] as const) {
          const d = decideLocalReach({ sandbox: 'sbx-1', backend, port: 8000, listening: listening(8000, address) });
          assert.equal(d.kind, 'host', `${backend} ${address}`);
          assert.equal(d.kind === 'host' && d.host, host);
          assert.match(d.message, /already listens on this machine/);
        }
      }
    });

    it('nothing listening: refused, and bubblewrap names isolateNetwork as the reason a started server is unreachable', () => {
      const p = decideLocalReach({ sandbox: 'sbx-1', backend: 'process', port: 8000, listening: listening(9000, '0.0.0.0') });
      assert.equal(p.kind, 'refused');
      assert.equal(p.kind === 'refused' && p.code, 'not_listening');
      assert.match(p.message, /nothing listens on port 8000 of sandbox sbx-1.*start the server first/);
      assert.doesNotMatch(p.message, /isolateNetwork\b.*only a loopback/);
      const b = decideLocalReach({ sandbox: 'sbx-1', backend: 'bubblewrap', port: 8000, listening: [] });
      assert.match(b.message, /isolateNetwork has a network of its own with only a loopback interface/);
    });

    it('a server bound to another address only, an unknown backend, and a different local port are refused in words', () => {
      const other = decideLocalReach({ sandbox: 'sbx-1', backend: 'process', port: 3000, listening: listening(3000, '10.1.1.5') });
      assert.equal(other.kind === 'refused' && other.code, 'not_on_loopback');
      assert.match(other.message, /listens only on 10\.1\.1\.5.*open 10\.1\.1\.5:3000 directly/);
      const unknown = decideLocalReach({ sandbox: 'sbx-1', backend: 'firecracker', port: 3000, listening: listening(3000, '0.0.0.0') });
      assert.equal(unknown.kind === 'refused' && unknown.code, 'unsupported_backend');
      const moved = decideLocalReach({ sandbox: 'sbx-1', backend: 'process', port: 3000, localPort: 4000, listening: listening(3000, '0.0.0.0') });
      assert.equal(moved.kind === 'refused' && moved.code, 'local_port_fixed');
      assert.match(moved.message, /already port 3000 of this machine/);
    });
  });

  describe('a real bubblewrap sandbox of the local gateway', () => {
    let t: TestGateway;
    let run: Run;
    let client: GatewayClient;
    const ports = new LocalPortSubstrate({} as SandboxProvider); // open() asks the provider nothing
    const sandbox = () => {
      const ref: SandboxRef = { provider: 'local', context: LOCAL_CONTEXT, namespace: 'default', name: run.metadata.name as string };
      return { ref, run, summary: { ref, key: sandboxKey(ref), runtime: 'bubblewrap', phase: 'Ready' as const } };
    };

    before(async () => {
      t = await startTestGateway();
      ({ run } = await readyRun(t.gw, { runtime: 'bubblewrap' }));
      client = new GatewayClient({ endpoint: { url: run.status?.endpoint?.url as string }, token: t.gw.token });
    });
    after(async () => {
      await client?.close();
      await t?.cleanup();
    });

    const freePort = () =>
      new Promise<number>((resolve) => {
        const s = net.createServer().listen(0, '127.0.0.1', () => {
          const { port } = s.address() as net.AddressInfo;
          s.close(() => resolve(port));
        });
      });

    /**
     * Starts `python3 -u -m http.server` in the sandbox and resolves once it says it serves (the stream is
     * read on to its end: leaving it early would cancel the command). `stop()` cancels it and waits until
     * nothing listens on the port any more.
     */
    async function serve(port: number, isolateNetwork: boolean): Promise<{ stop(): Promise<void> }> {
      const controller = new AbortController();
      const argv = ['python3', '-u', '-m', 'http.server', String(port), '--bind', '127.0.0.1'];
      let out = '';
      const ended = (async () => {
        for await (const e of client.stream({ command: { argv, isolateNetwork } }, { signal: controller.signal })) {
          if (e.type === 'output' && e.output.data) out += Buffer.from(e.output.data, 'base64').toString('utf8');
        }
      })().catch(() => undefined);
      const deadline = Date.now() + 15_000;
      while (!out.includes('Serving HTTP')) {
        const done = await Promise.race([ended.then(() => true), new Promise((r) => setTimeout(r, 20, false))]);
        if (done || Date.now() > deadline) throw new Error(`the server did not start: ${out}`);
      }
      return {
        stop: async () => {
          controller.abort();
          await ended;
          while ((await hostListeningPorts()).some((p) => p.port === port)) await new Promise((r) => setTimeout(r, 20));
        },
      };
    }

    it('without isolateNetwork the server is reached at its own address; once it stops, the refusal says nothing listens', async () => {
      const port = await freePort();
      const server = await serve(port, false);
      try {
        const opened = await ports.open(sandbox(), port);
        assert.equal(opened.via, 'host');
        assert.equal(opened.localPort, port);
        assert.equal(opened.localHost, '127.0.0.1');
        const res = await fetch(`http://${opened.localHost}:${opened.localPort}/`);
        assert.equal(res.status, 200);
        assert.match(await res.text(), /Directory listing/);
      } finally {
        await server.stop();
      }
      await assert.rejects(ports.open(sandbox(), port), (e: unknown) => e instanceof CompanionError && e.causeCode === 'not_listening');
    });

    it('a server started with isolateNetwork: the forward is refused, naming isolateNetwork', async () => {
      const port = await freePort();
      const server = await serve(port, true);
      try {
        await assert.rejects(ports.open(sandbox(), port), (e: unknown) => {
          assert.ok(e instanceof CompanionError);
          assert.equal(e.causeCode, 'not_listening');
          assert.match(e.message, /isolateNetwork has a network of its own/);
          return true;
        });
      } finally {
        await server.stop();
      }
    });
  });
});
