// Port forwarding (`ports/*`, `ports/ended`): one feature of the method table in index.ts; the schemas are
// in protocol/ports.ts.
import { z } from 'zod';
import {
  PortEndedSchema,
  PortForwardParamsSchema,
  PortForwardSchema,
  PortForwardsParamsSchema,
  PortForwardsResultSchema,
  PortListParamsSchema,
  PortListResultSchema,
  PortStopParamsSchema,
} from '../ports';
import { defineMethod, defineNotification } from './contract';

const EXAMPLE_REF = { provider: 'kruntimes', context: 'prod', namespace: 'agents', name: 'sbx-7k2p9' } as const;
const EXAMPLE_FORWARD = {
  id: 'pf-1',
  ref: EXAMPLE_REF,
  key: 'kruntimes.prod.agents.sbx-7k2p9',
  sandboxPort: 8000,
  localHost: '127.0.0.1',
  localPort: 41213,
  url: 'http://127.0.0.1:41213/',
  via: 'port-forward',
  message: "port 8000 of sandbox sbx-7k2p9 is forwarded to 127.0.0.1:41213 through the API server (Pod agents/runtime-bash-0)",
  startedAt: '2025-01-01T00:00:00.000Z',
} as const;

export const portMethods = {
  'ports/list': defineMethod('ports/list', {
    description:
      'The TCP ports the sandbox listens on, read from `/proc/net/tcp` and `/proc/net/tcp6` (no tool needs to be ' +
      "installed in the image). A kruntimes sandbox, and a local one on the `opensandbox` backend (a container with a " +
      "network of its own), runs `cat` as one command through the session, so it waits its turn " +
      'behind a running command for a few seconds and is then refused (`unavailable`, cause `sandbox_busy`) — a ' +
      "sandbox runs one command at a time. A local sandbox shares this machine's network: its list is this machine's.",
    params: PortListParamsSchema,
    result: PortListResultSchema,
    example: { params: { ref: EXAMPLE_REF }, result: { ports: [{ port: 8000, address: '0.0.0.0', family: 'ipv4' }] } },
  }),
  'ports/forward': defineMethod('ports/forward', {
    description:
      "Makes a sandbox's port reachable on a loopback port of this machine (127.0.0.1 only; `localPort`, else a free " +
      'one). A local `process` sandbox, or a `bubblewrap` one, shares the host network: the port is answered with its ' +
      'own address (`via: "host"`), and nothing listening there — or a server started with isolateNetwork, which has ' +
      'only its own loopback — is refused in words. A kruntimes sandbox is reached through a port-forward of its ' +
      "Run's assigned Pod via the API server (`via: \"port-forward\"`; needs `create` on `pods/portforward`, a 403 is " +
      'refused in words). A local sandbox on the `opensandbox` backend is reached through its OpenSandbox endpoint for ' +
      'the port, behind a proxy on 127.0.0.1 that adds the headers the endpoint requires (`via: "proxy"`; HTTP, ' +
      'streamed bodies and WebSocket; the OpenSandbox API key stays in the gateway daemon). A sandbox that is not ' +
      'Ready is refused; one that ended, with `sandbox_ended`. The forward ends when `ports/stop` asks, when the ' +
      'sandbox ends (`ports/ended`), or when this client disconnects.',
    params: PortForwardParamsSchema,
    result: z.object({ forward: PortForwardSchema }),
    example: { params: { ref: EXAMPLE_REF, port: 8000 }, result: { forward: EXAMPLE_FORWARD } },
  }),
  'ports/forwards': defineMethod('ports/forwards', {
    description: "The forwards this client holds (of one sandbox with `ref`), oldest first.",
    params: PortForwardsParamsSchema,
    result: PortForwardsResultSchema,
    example: { params: {}, result: { forwards: [EXAMPLE_FORWARD] } },
  }),
  'ports/stop': defineMethod('ports/stop', {
    description: 'Stops a forward: its loopback port is closed and its open connections end. `stopped: false` when there is no such forward.',
    params: PortStopParamsSchema,
    result: z.object({ stopped: z.boolean() }),
    example: { params: { id: 'pf-1' }, result: { stopped: true } },
  }),
} as const;

export const portNotifications = {
  'ports/ended': defineNotification('ports/ended', {
    description: 'A forward from `ports/forward` ended by itself: its sandbox ended or was deleted (its loopback port is closed).',
    params: PortEndedSchema,
    example: { forward: EXAMPLE_FORWARD, reason: 'sandbox sbx-7k2p9 ended (Succeeded)' },
  }),
} as const;
