// The listening TCP sockets of a Linux network namespace, read from `/proc/net/tcp` and
// `/proc/net/tcp6` as `ss -ltn` does, but with nothing to install: every Linux image can `cat`
// them. A row is `sl local_address rem_address st …`; the local address is hex in the kernel's
// byte order (little-endian on x86-64 and arm64, which is all kruntimes and the local runtime
// run on), the port hex in network order, and state `0A` is LISTEN.
import type { ListeningPort } from '../../protocol/ports';

const LISTEN = '0A';

/** The command that prints both tables (tcp6 may be missing where IPv6 is off; the tcp rows still come). */
export const PROC_NET_TCP_ARGV = ['cat', '/proc/net/tcp', '/proc/net/tcp6'];

function ipv4(hex: string): string {
  const bytes = Buffer.from(hex, 'hex');
  return [bytes[3], bytes[2], bytes[1], bytes[0]].join('.');
}

function ipv6(hex: string): string {
  // Four 32-bit words, each in the kernel's (little-endian) byte order.
  const bytes: number[] = [];
  for (let w = 0; w < 4; w++) {
    const word = Buffer.from(hex.slice(w * 8, w * 8 + 8), 'hex');
    bytes.push(word[3] as number, word[2] as number, word[1] as number, word[0] as number);
  }
  if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) {
    return `::ffff:${bytes.slice(12).join('.')}`; // an IPv4-mapped address
  }
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((((bytes[i] as number) << 8) | (bytes[i + 1] as number)).toString(16));
  // The longest run of two or more zero groups becomes `::` (RFC 5952).
  let best = { at: -1, len: 0 };
  for (let i = 0; i < 8; ) {
    if (groups[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > best.len && j - i >= 2) best = { at: i, len: j - i };
    i = j;
  }
  if (best.at < 0) return groups.join(':');
  return `${groups.slice(0, best.at).join(':')}::${groups.slice(best.at + best.len).join(':')}`;
}

/**
 * The LISTEN sockets in the text of `/proc/net/tcp` and/or `/proc/net/tcp6` (any number of tables,
 * header lines and all): one entry per port — the first address seen for it that answers on the
 * loopback interface, else the first seen — ascending by port.
 */
export function parseProcNetTcp(text: string): ListeningPort[] {
  const byPort = new Map<number, ListeningPort>();
  for (const line of text.split('\n')) {
    const m = /^\s*\d+:\s+([0-9A-Fa-f]{8}|[0-9A-Fa-f]{32}):([0-9A-Fa-f]{4})\s+[0-9A-Fa-f:]+\s+([0-9A-Fa-f]{2})\s/.exec(line);
    if (!m || (m[3] as string).toUpperCase() !== LISTEN) continue;
    const hex = m[1] as string;
    const port = parseInt(m[2] as string, 16);
    if (port === 0) continue;
    const seen = byPort.get(port);
    if (seen && answersOnLoopback(seen.address)) continue;
    const entry: ListeningPort = hex.length === 8 ? { port, address: ipv4(hex), family: 'ipv4' } : { port, address: ipv6(hex), family: 'ipv6' };
    if (!seen || answersOnLoopback(entry.address)) byPort.set(port, entry);
  }
  return [...byPort.values()].sort((a, b) => a.port - b.port);
}

/** Whether a socket bound to `address` answers on the loopback interface (a wildcard or a loopback address). */
export function answersOnLoopback(address: string): boolean {
  return address === '0.0.0.0' || address.startsWith('127.') || address === '::' || address === '::1' || address.startsWith('::ffff:127.') || address === '::ffff:0.0.0.0';
}
