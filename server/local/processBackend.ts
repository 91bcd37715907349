// The `process` backend: no isolation at all. Each command is a plain child process in a new
// session/process group, so cancel can signal the whole group. It refuses anything that
// needs isolation (isolateNetwork) instead of pretending.
import { SessionError } from './sessionError';
import type { Backend, LaunchSpec, ProbeResult, SpawnPlan } from './backend';

export class ProcessBackend implements Backend {
  readonly name = 'process';
  readonly description = 'no isolation: commands run as the daemon user in their own process group';
  readonly capabilities = { isolation: 'none', isolateNetwork: false, pidNamespace: false, readOnlyHost: false } as const;

  async probe(): Promise<ProbeResult> {
    if (process.platform === 'win32') return { ok: false, reason: 'process groups need a POSIX system' };
    return { ok: true, detail: 'commands run without isolation, one process group each' };
  }

  plan(spec: LaunchSpec): SpawnPlan {
    if (spec.isolateNetwork) {
      throw new SessionError(
        'FailedPrecondition',
        'backend "process" cannot isolate the network (it has no isolation); use a Run on the "bubblewrap" backend',
      );
    }
    const [file, ...args] = spec.argv;
    if (file === undefined) throw new SessionError('InvalidArgument', 'command argv must not be empty');
    return { file, args };
  }
}
