// The `bubblewrap` backend: each command runs under `bwrap` in fresh Linux namespaces. The
// host is mounted read-only, only the workspace (and a per-Run /tmp) is writable, the state
// root (which holds the gateway token) is hidden, a pid namespace makes "kill the command"
// mean every descendant, and `isolateNetwork` adds a network namespace with only `lo`.
import { execFile } from 'node:child_process';
import { SessionError } from './sessionError';
import type { Backend, LaunchSpec, ProbeResult, SpawnPlan } from './backend';

export const BWRAP = 'bwrap';

export class BubblewrapBackend implements Backend {
  readonly name = 'bubblewrap';
  readonly description = 'Linux namespaces via bwrap: read-only host, writable workspace, own pid namespace, optional network isolation';
  readonly capabilities = { isolation: 'namespaces', isolateNetwork: true, pidNamespace: true, readOnlyHost: true } as const;

  constructor(private readonly bwrapPath = BWRAP) {}

  probe(): Promise<ProbeResult> {
    if (process.platform !== 'linux') return Promise.resolve({ ok: false, reason: 'bubblewrap needs Linux namespaces' });
    return new Promise((resolve) => {
      execFile(
        this.bwrapPath,
        ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--unshare-pid', '--unshare-net', '--die-with-parent', 'true'],
        { timeout: 5000 },
        (err, _stdout, stderr) => {
          if (!err) return resolve({ ok: true, detail: `${this.bwrapPath} creates pid, mount and network namespaces` });
          const code = (err as NodeJS.ErrnoException).code;
          if (code === 'ENOENT') {
            return resolve({ ok: false, reason: `${this.bwrapPath} is not installed (Debian/Ubuntu: apt-get install bubblewrap)` });
          }
          const text = String(stderr).trim() || err.message;
          const hint = /Operation not permitted|No permissions|setting up uid map/i.test(text)
            ? ' (unprivileged user namespaces may be disabled: check kernel.unprivileged_userns_clone / kernel.apparmor_restrict_unprivileged_userns, or a container seccomp profile)'
            : '';
          resolve({ ok: false, reason: `${this.bwrapPath} cannot create namespaces: ${text}${hint}` });
        },
      );
    });
  }

  plan(spec: LaunchSpec): SpawnPlan {
    if (spec.argv.length === 0) throw new SessionError('InvalidArgument', 'command argv must not be empty');
    const args = [
      '--die-with-parent',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--unshare-cgroup-try',
      '--ro-bind',
      '/',
      '/',
      '--dev',
      '/dev',
      '--proc',
      '/proc',
    ];
    args.push('--bind', spec.tmpDir, '/tmp');
    for (const dir of spec.hide) args.push('--tmpfs', dir);
    for (const dir of spec.writable) args.push('--bind', dir, dir);
    if (spec.isolateNetwork) args.push('--unshare-net');
    args.push('--chdir', spec.cwd, '--', ...spec.argv);
    return { file: this.bwrapPath, args };
  }
}
