// Reaching a sandbox's servers from the user's machine, as any editor asks for it over JSON-RPC:
// the ports a sandbox listens on (`ports/list`), a forward of one of them to a loopback port
// (`ports/forward`: 127.0.0.1 only), the forwards this client holds (`ports/forwards`) and
// stopping one (`ports/stop`). A forward says in words how the port is reached, because that
// differs per substrate: a local sandbox on the host network is already there (`via: "host"`),
// a kruntimes sandbox is reached through a Kubernetes port-forward to its Run's Pod
// (`via: "port-forward"`), and a substrate with an HTTP endpoint per port (OpenSandbox) is
// reached through a loopback proxy that adds the headers it requires (`via: "proxy"`).
import { z } from 'zod';
import { SandboxRefSchema } from './sandboxes';

export const PortNumberSchema = z.number().int().min(1).max(65535);

/** One listening TCP socket in the sandbox's network, from `/proc/net/tcp` or `/proc/net/tcp6`. */
export const ListeningPortSchema = z.object({
  port: PortNumberSchema,
  /** The address it is bound to as the kernel reports it: `0.0.0.0`, `127.0.0.1`, `::`, `::1`… */
  address: z.string(),
  family: z.enum(['ipv4', 'ipv6']),
});
export type ListeningPort = z.infer<typeof ListeningPortSchema>;

export const PortListParamsSchema = z.object({ ref: SandboxRefSchema });
export const PortListResultSchema = z.object({
  /** One entry per port (the first address seen for it), ascending. */
  ports: z.array(ListeningPortSchema),
  /** Where the list came from and what it means, in words (e.g. that the sandbox shares this machine's network). */
  note: z.string().optional(),
});
export type PortListResult = z.infer<typeof PortListResultSchema>;

/** How a forwarded port is reached. */
export const PortReachSchema = z.enum(['host', 'port-forward', 'proxy']);
export type PortReach = z.infer<typeof PortReachSchema>;

export const PortForwardSchema = z.object({
  id: z.string(),
  ref: SandboxRefSchema,
  /** The sandbox key (the `sandbox:` URI authority) of `ref`. */
  key: z.string(),
  sandboxPort: PortNumberSchema,
  /** Always a loopback host: `127.0.0.1` (or `::1` for a local server bound to IPv6 only). */
  localHost: z.string(),
  localPort: PortNumberSchema,
  /** `http://127.0.0.1:<localPort>/`, for a browser. */
  url: z.string(),
  via: PortReachSchema,
  /** How it is reached, in words. */
  message: z.string(),
  startedAt: z.string(),
});
export type PortForward = z.infer<typeof PortForwardSchema>;

export const PortForwardParamsSchema = z.object({
  ref: SandboxRefSchema,
  port: PortNumberSchema,
  /** A loopback port to listen on; a free one when absent. */
  localPort: PortNumberSchema.optional(),
});

export const PortForwardsParamsSchema = z.object({ ref: SandboxRefSchema.optional() });
export const PortForwardsResultSchema = z.object({ forwards: z.array(PortForwardSchema) });
export const PortStopParamsSchema = z.object({ id: z.string().min(1) });

/** `ports/ended`: a forward ended without being asked (its sandbox ended or is gone). */
export const PortEndedSchema = z.object({ forward: PortForwardSchema, reason: z.string() });
export type PortEnded = z.infer<typeof PortEndedSchema>;

/** `host:port` as a person types it into a browser (IPv6 in brackets). */
export function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
