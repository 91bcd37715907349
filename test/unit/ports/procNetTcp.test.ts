// Listening ports from /proc/net/tcp and /proc/net/tcp6: the kernel's text (byte order, IPv6
// groups, IPv4-mapped addresses, non-LISTEN rows), and this machine's real tables while servers
// of this test listen and after they closed.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import { answersOnLoopback, parseProcNetTcp, PROC_NET_TCP_ARGV } from '../../../server/ports/procNetTcp';

const TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 3481 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2211 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F40 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000  1000        0 9911 1 0000000000000000 20 4 30 10 -1
   3: 0501010A:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 9912 1 0000000000000000 100 0 0 10 0
   4: 0100007F:9C40 0100007F:1F40 01 00000000:00000000 00:00000000 00000000  1000        0 9913 1 0000000000000000 20 4 30 10 -1
`;
const TCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0BB9 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4410 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:1389 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4411 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:138A 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4412 1 0000000000000000 100 0 0 10 0
   3: B80D0120000000000000000001000000:138B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4413 1 0000000000000000 100 0 0 10 0
   4: 00000000000000000000000000000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4414 1 0000000000000000 100 0 0 10 0
`;

describe('ports: /proc/net/tcp parsing', () => {
  it('reads LISTEN rows only, in the kernel byte order, one entry per port, ascending', () => {
    assert.deepEqual(parseProcNetTcp(TCP + TCP6), [
      { port: 22, address: '0.0.0.0', family: 'ipv4' },
      // 3000 listens on 10.1.1.5 (tcp) and on :: (tcp6): the address that answers on loopback wins.
      { port: 3000, address: '::', family: 'ipv6' },
      { port: 3001, address: '::', family: 'ipv6' },
      { port: 5001, address: '::1', family: 'ipv6' },
      { port: 5002, address: '::ffff:127.0.0.1', family: 'ipv6' },
      { port: 5003, address: '2001:db8::1', family: 'ipv6' },
      { port: 8000, address: '127.0.0.1', family: 'ipv4' },
    ]);
  });

  it('keeps a port bound to a non-loopback address only as it is (so a forward can say so)', () => {
    assert.deepEqual(parseProcNetTcp(TCP.split('\n').filter((l) => !l.includes(':0016') && !l.includes(':1F40')).join('\n')), [{ port: 3000, address: '10.1.1.5', family: 'ipv4' }]);
    assert.equal(answersOnLoopback('10.1.1.5'), false);
    for (const a of ['0.0.0.0', '127.0.0.1', '127.0.1.1', '::', '::1', '::ffff:127.0.0.1']) assert.equal(answersOnLoopback(a), true, a);
  });

  it('ignores text that is not a table (an error message, an empty file)', () => {
    assert.deepEqual(parseProcNetTcp('cat: /proc/net/tcp6: No such file or directory\n'), []);
    assert.deepEqual(parseProcNetTcp(''), []);
  });

  it("finds this machine's real listeners through the command a sandbox runs, and not after they close", async () => {
    const listen = (host: string) =>
      new Promise<net.Server>((resolve, reject) => {
        const s = net.createServer();
        s.once('error', reject);
        s.listen(0, host, () => resolve(s));
      });
    const v4 = await listen('127.0.0.1');
    const v6 = await listen('::1').catch(() => undefined); // a machine without IPv6
    const port = (s: net.Server) => (s.address() as net.AddressInfo).port;
    const read = () => {
      let out: string;
      try {
        out = execFileSync(PROC_NET_TCP_ARGV[0] as string, PROC_NET_TCP_ARGV.slice(1), { encoding: 'utf8' });
      } catch (err) {
        out = String((err as { stdout?: string }).stdout ?? ''); // tcp6 missing: tcp's rows still came
      }
      return parseProcNetTcp(out);
    };
    const closed = [port(v4), ...(v6 ? [port(v6)] : [])];
    try {
      const seen = read();
      assert.deepEqual(seen.find((p) => p.port === port(v4)), { port: port(v4), address: '127.0.0.1', family: 'ipv4' });
      if (v6) assert.deepEqual(seen.find((p) => p.port === port(v6)), { port: port(v6), address: '::1', family: 'ipv6' });
    } finally {
      await new Promise((r) => v4.close(r));
      if (v6) await new Promise((r) => v6.close(r));
    }
    const after = read();
    for (const p of closed) assert.equal(after.find((l) => l.port === p), undefined, `port ${p} still listed after close`);
  });
});
