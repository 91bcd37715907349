// A local Run's workspace inside an OpenSandbox sandbox: the remote side of the local runtime's
// SessionWorkspace port. Commands go to execd (`bash -c`, streamed, the exit code from its
// `error` event, cancel = interrupt, which ends the process group before the stream ends); file
// operations go to execd's file API with the kruntimes semantics and messages the host workspace
// has (parents must exist unless asked, delete of a directory needs `recursive`, rename refuses
// an existing destination unless `overwrite`, bounded ranged reads, byte-wise ordered pages).
// Paths are workspace-relative and confined lexically to the workspace; inside the sandbox a
// symlink may point anywhere in the container — the container, not the workspace, is the boundary.
// It also has an interactive terminal: execd's PTY (opensandboxTerminal.ts), which the gateway bridges.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { GatewayLimits, GatewayMessages, type FileEntry } from '../../../protocol/kruntimes/gateway';
import { ArtifactInvalidError } from '../../local/artifactExport';
import type { RemoteWorkspace } from '../../local/backend';
import type { ExecRecord } from '../../local/execRecord';
import { Capture, type CommandOutcome } from '../../local/execution';
import type { ListPage, ReadResult } from '../../local/fileOperations';
import { pageStart, takePage } from '../../local/listingPage';
import { SessionError, failedPrecondition, invalidArgument } from '../../local/sessionError';
import type { PortEndpoint, WorkspaceCommand } from '../../local/sessionWorkspace';
import type { WorkspaceTerminal, WorkspaceTerminalOptions, WorkspaceTerminalSink } from '../../local/workspaceTerminal';
import { cleanRelative } from '../../local/workspacePaths';
import { OpenSandboxError } from './errors';
import type { FileStat, OpenSandboxSandbox } from './opensandboxClient';
import { OpenSandboxTerminal } from './opensandboxTerminal';
import { shellQuote } from '../../../protocol/shellQuote';

/** Where the workspace and the artifacts directory are inside every sandbox. */
export const REMOTE_WORKSPACE = '/workspace';
export const REMOTE_ARTIFACTS = '/artifacts';
/** How often a streamed command's new output is fetched. */
const OUTPUT_POLL_MS = 100;

/** An OpenSandbox failure as the access API reports it (same gRPC code, the message that says what to do). */
export function toSessionError(err: unknown): Error {
  if (err instanceof SessionError) return err;
  if (err instanceof OpenSandboxError) return new SessionError(err.code, err.message);
  return new SessionError('Internal', (err as Error)?.message ?? String(err));
}

export interface OpenSandboxWorkspaceOptions {
  /** The session root inside the sandbox (the workspace, or workspace/repo with a Git source). */
  root: string;
  log: (line: string) => void;
  /** Renews the sandbox's TTL every so often while the workspace is open (ms; 0 = never). */
  renewEveryMs: number;
  ttlSeconds: number;
}

export class OpenSandboxWorkspace implements RemoteWorkspace {
  readonly hostRoot = undefined;
  readonly artifactsPath = REMOTE_ARTIFACTS;
  private readonly renewal: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly terminals = new Set<OpenSandboxTerminal>();

  constructor(
    readonly sandbox: OpenSandboxSandbox,
    private readonly o: OpenSandboxWorkspaceOptions,
  ) {
    if (o.renewEveryMs > 0) {
      this.renewal = setInterval(() => {
        void this.sandbox.renew(o.ttlSeconds).catch((err: unknown) => o.log(`renewing the TTL of OpenSandbox sandbox ${sandbox.id}: ${(err as Error).message}`));
      }, o.renewEveryMs);
      this.renewal.unref();
    }
  }

  private abs(rel: string): string {
    return rel === '' ? this.o.root : path.posix.join(this.o.root, rel);
  }

  private async statOrUndefined(abs: string): Promise<FileStat | undefined> {
    try {
      return await this.sandbox.stat(abs);
    } catch (err) {
      if (err instanceof OpenSandboxError && err.code === 'NotFound') return undefined;
      throw toSessionError(err);
    }
  }

  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toSessionError(err);
    }
  }

  // ---- commands -------------------------------------------------------------------------------

  async runCommand(c: WorkspaceCommand): Promise<CommandOutcome> {
    const cmd = c.command;
    const cwdRel = cleanRelative(cmd.workingDirectory ?? '', { allowRoot: true });
    const cwd = this.abs(cwdRel);
    if ((await this.statOrUndefined(cwd))?.type !== 'directory') {
      throw invalidArgument(`working directory ${cmd.workingDirectory ?? ''} is not a directory in the workspace`);
    }
    const command = cmd.argv && cmd.argv.length > 0 ? cmd.argv.map(shellQuote).join(' ') : (cmd.shell ?? '');
    // execd streams output as text lines (CR and LF both end one; invalid UTF-8 is replaced), which
    // loses bytes: the command writes to two files instead, and their new bytes are fetched with
    // ranged downloads while it runs — exact output, stdout and stderr apart, streamed.
    const files = { stdout: `/tmp/.sandbox-sessions-${c.operationId}.stdout`, stderr: `/tmp/.sandbox-sessions-${c.operationId}.stderr` };
    let redirect = `>${shellQuote(files.stdout)} 2>${shellQuote(files.stderr)}`;
    let cleanup = '';
    if (cmd.stdin) {
      // execd gives commands /dev/null as stdin: the bytes go to a file the command reads (and removes) first.
      const file = `/tmp/.sandbox-sessions-${c.operationId}.stdin`;
      await this.guard(() => this.sandbox.writeFile(file, Buffer.from(cmd.stdin as string, 'base64'), 0o600));
      redirect = `<${shellQuote(file)} ${redirect}`;
      cleanup = ` rm -f -- ${shellQuote(file)};`;
    }
    const line = `exec ${redirect};${cleanup} ${command}`;
    const captures = {
      stdout: new Capture('stdout', GatewayLimits.maxOutputBytes, c.onOutput),
      stderr: new Capture('stderr', GatewayLimits.maxOutputBytes, c.onOutput),
    };
    const offsets = { stdout: 0, stderr: 0 };
    const pump = async (): Promise<void> => {
      for (const stream of ['stdout', 'stderr'] as const) {
        if (offsets[stream] > GatewayLimits.maxOutputBytes) continue; // capped: the rest is not fetched
        const st = await this.sandbox.stat(files[stream]).catch(() => undefined);
        if (!st || st.size <= offsets[stream]) continue;
        const end = Math.min(st.size, offsets[stream] + GatewayLimits.maxOutputBytes + 1) - 1;
        const chunk = await this.sandbox.readFile(files[stream], { start: offsets[stream], end });
        offsets[stream] += chunk.length;
        captures[stream].push(chunk);
      }
    };
    const timeoutMs = cmd.timeoutMillis ?? 0;
    const started = Date.now();
    let exitCode: number | null;
    let finished = false;
    const running = this.sandbox.exec(line, {
      cwd,
      env: c.env,
      ...(timeoutMs > 0 ? { timeoutSeconds: timeoutMs / 1000 } : {}),
      signal: c.signal,
      onStarted: (commandId) => c.onStarted({ remote: { sandboxId: this.sandbox.id, commandId } }, command),
    });
    const polling = (async () => {
      while (!finished) {
        await new Promise((r) => setTimeout(r, OUTPUT_POLL_MS));
        if (!finished && c.onOutput) await pump().catch(() => undefined);
      }
    })();
    try {
      exitCode = (await running).exitCode;
    } catch (err) {
      if (c.signal.aborted) exitCode = -1; // the sandbox went away while the command was being cancelled
      else throw toSessionError(err);
    } finally {
      finished = true;
      await polling;
    }
    await pump().catch((err: unknown) => this.o.log(`reading the output of ${c.operationId}: ${(err as Error).message}`));
    await Promise.all([this.sandbox.delete(files.stdout), this.sandbox.delete(files.stderr)]).catch(() => undefined);
    const aborted = c.signal.aborted;
    const code = exitCode ?? -1;
    return {
      exitCode: code,
      stdout: captures.stdout.result(),
      stderr: captures.stderr.result(),
      timedOut: !aborted && code === -1 && timeoutMs > 0 && Date.now() - started >= timeoutMs,
      ...(aborted ? { abortReason: c.signal.reason as unknown } : {}),
    };
  }

  async interruptRecorded(rec: ExecRecord): Promise<boolean> {
    if (!rec.remote || rec.remote.sandboxId !== this.sandbox.id) return false;
    try {
      await this.sandbox.interrupt(rec.remote.commandId);
      return true;
    } catch {
      return false; // execd answers 500 for a command that is not running (any more)
    }
  }

  // ---- files ----------------------------------------------------------------------------------

  async writeFile(p: string, contents: Buffer, createParents: boolean): Promise<void> {
    if (contents.length > GatewayLimits.maxFileBytes) throw new SessionError('ResourceExhausted', GatewayMessages.contentsTooLarge);
    const rel = cleanRelative(p, { allowRoot: false });
    const abs = this.abs(rel);
    const parent = await this.statOrUndefined(path.posix.dirname(abs));
    if (!createParents && parent?.type !== 'directory') {
      throw new SessionError('NotFound', `resolve file parent: stat /${path.posix.dirname(rel)}: no such file or directory`);
    }
    const existing = await this.statOrUndefined(abs);
    if (existing?.type === 'directory') throw new SessionError('Internal', `write session file: open /${rel}: is a directory`);
    await this.guard(() => this.sandbox.writeFile(abs, contents, 0o644));
  }

  async createDirectory(p: string): Promise<void> {
    const rel = cleanRelative(p, { allowRoot: false });
    const existing = await this.statOrUndefined(this.abs(rel));
    if (existing && existing.type !== 'directory') throw new SessionError('Internal', `create session directory: mkdir /${rel}: not a directory`);
    await this.guard(() => this.sandbox.mkdir(this.abs(rel)));
  }

  async deleteFile(p: string, recursive: boolean): Promise<void> {
    const rel = cleanRelative(p, { allowRoot: false });
    const st = await this.statOrUndefined(this.abs(rel));
    if (!st) throw new SessionError('NotFound', `delete session file: lstat /${rel}: no such file or directory`);
    if (st.type === 'directory' && !recursive) throw failedPrecondition(GatewayMessages.recursiveRequired);
    await this.guard(() => this.sandbox.delete(this.abs(rel)));
  }

  async renameFile(from: string, to: string, overwrite: boolean): Promise<void> {
    const src = cleanRelative(from, { allowRoot: false });
    const dest = cleanRelative(to, { allowRoot: false });
    if (!(await this.statOrUndefined(this.abs(src)))) throw new SessionError('NotFound', `rename session file: lstat /${src}: no such file or directory`);
    const existing = await this.statOrUndefined(this.abs(dest));
    if (existing && !overwrite) throw new SessionError('AlreadyExists', GatewayMessages.destinationExists);
    // execd's mv refuses an existing destination: an overwrite removes it first (rename(2) would replace it).
    if (existing) await this.guard(() => this.sandbox.delete(this.abs(dest)));
    await this.guard(() => this.sandbox.rename(this.abs(src), this.abs(dest)));
  }

  async read(p: string, maxBytes: number, offset: number): Promise<ReadResult> {
    const rel = cleanRelative(p, { allowRoot: false });
    const abs = this.abs(rel);
    const st = await this.statOrUndefined(abs);
    if (!st) throw new SessionError('NotFound', `open session file: open /${rel}: no such file or directory`);
    if (st.type === 'directory') throw new SessionError('Internal', `read session file: read /${rel}: is a directory`);
    const limit = Math.min(maxBytes, GatewayLimits.maxFileBytes);
    const want = Math.max(0, Math.min(limit, st.size - offset));
    if (want === 0) return { contents: Buffer.alloc(0), truncated: st.size > offset };
    const contents = await this.guard(() => this.sandbox.readFile(abs, { start: offset, end: offset + want - 1 }));
    return { contents, truncated: offset + contents.length < st.size };
  }

  async list(dir: string, limit: number, pageToken: string): Promise<ListPage> {
    const after = pageStart(dir, limit, pageToken);
    const rel = cleanRelative(dir, { allowRoot: true });
    const abs = this.abs(rel);
    const st = await this.statOrUndefined(abs);
    if (!st) throw new SessionError('NotFound', `list session file: open /${rel}: no such file or directory`);
    if (st.type !== 'directory') throw new SessionError('Internal', `list session file: readdirent /${rel}: not a directory`);
    const children = (await this.guard(() => this.sandbox.list(abs, 1))).map((f) => ({ name: path.posix.basename(f.path), stat: f }));
    const { page, nextPageToken } = takePage(children, (c) => c.name, dir, after, limit);
    const entries: FileEntry[] = page.map((c) => ({ path: c.name, directory: c.stat.type === 'directory', sizeBytes: c.stat.size }));
    return { entries, nextPageToken };
  }

  // ---- artifacts ------------------------------------------------------------------------------

  /** Every top-level entry of the sandbox's artifacts directory, files and directories (recursively), into `dir`. */
  async downloadArtifacts(dir: string): Promise<void> {
    const top = await this.statOrUndefined(REMOTE_ARTIFACTS);
    if (!top) return; // nothing was written there
    const entries = await this.guard(() => this.sandbox.list(REMOTE_ARTIFACTS, 64));
    for (const entry of entries) {
      const rel = path.posix.relative(REMOTE_ARTIFACTS, entry.path);
      if (rel === '' || rel.startsWith('..')) continue;
      const target = path.join(dir, ...rel.split('/'));
      if (entry.type === 'directory') {
        await fsp.mkdir(target, { recursive: true, mode: 0o755 });
      } else if (entry.type === 'file') {
        await fsp.mkdir(path.dirname(target), { recursive: true, mode: 0o755 });
        await this.guard(() => pipeline(Readable.from(this.sandbox.readStream(entry.path)), fs.createWriteStream(target, { mode: 0o644 })));
        const size = (await fsp.stat(target)).size;
        if (size !== entry.size) throw new SessionError('DataLoss', `artifact ${rel}: downloaded ${size} bytes, the sandbox has ${entry.size}`);
      } else {
        // A symlink or special file is not an artifact: kruntimes refuses such an export, and so does the local one.
        throw new ArtifactInvalidError(`artifact ${rel} is a ${entry.type}; only files and directories are exported`);
      }
    }
  }

  // ---- interactive terminal ---------------------------------------------------------------

  /** execd's PTY (spec §5), bridged to the editor by the gateway's `GET P/pty`. */
  async openTerminal(o: WorkspaceTerminalOptions, sink: WorkspaceTerminalSink): Promise<WorkspaceTerminal> {
    if (this.closed) throw failedPrecondition('the sandbox is closing');
    const terminal = await this.guard(() => OpenSandboxTerminal.open(this.sandbox, this.o.root, o, sink, (t) => this.terminals.delete(t)));
    this.terminals.add(terminal);
    return terminal;
  }

  // ---- ports ---------------------------------------------------------------------------------

  /** OpenSandbox's endpoint for a sandbox port, for a loopback proxy on the editor's side (server/ports/opensandboxPorts.ts). */
  async portEndpoint(port: number): Promise<PortEndpoint> {
    if (this.closed) throw failedPrecondition('the sandbox is closing');
    return this.guard(() => this.sandbox.portEndpoint(port));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.renewal) clearInterval(this.renewal);
    // Open terminals are cut off (their editors are told the connection closed); the sandbox goes next.
    for (const t of this.terminals) t.detach();
    this.terminals.clear();
    await this.sandbox.close();
  }
}

/** Copies a host directory's tree (a Run's prepared workspace) into the sandbox under `root`. */
export async function seedWorkspace(sandbox: OpenSandboxSandbox, hostDir: string, root: string): Promise<number> {
  let files = 0;
  const walk = async (rel: string): Promise<void> => {
    const entries = await fsp.readdir(path.join(hostDir, rel), { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      const childRel = rel === '' ? e.name : `${rel}/${e.name}`;
      const remote = path.posix.join(root, childRel);
      if (e.isDirectory()) {
        await sandbox.mkdir(remote);
        await walk(childRel);
      } else if (e.isFile()) {
        const st = await fsp.stat(path.join(hostDir, childRel));
        await sandbox.writeFile(remote, fs.createReadStream(path.join(hostDir, childRel)), st.mode & 0o777);
        files++;
      }
    }
  };
  await walk('');
  return files;
}
