// `sandbox-revision://<revision>.<session id>/<path>`: any retained revision, read-only, served
// by the companion straight from its bundle (indexed once per revision), so `vscode.diff` can
// compare a file across revisions, across a fork, or with a live sandbox — nothing is hydrated.
// `sandbox-revision://opened.<sandbox key>/<path>`: a sandbox's opening snapshot, served the same way
// (protocol/companion/openings.ts), for "changed since opened".
import * as vscode from 'vscode';
import { parseSandboxKey, type SandboxRef } from '../../protocol/sandboxes';
import type { CompanionClient } from '../companion/companionClient';

export const REVISION_SCHEME = 'sandbox-revision';
const READ_CHUNK = 786_000;

export function revisionUri(sessionId: string, revision: string, path = ''): vscode.Uri {
  return vscode.Uri.from({ scheme: REVISION_SCHEME, authority: `${revision}.${encodeURIComponent(sessionId)}`, path: `/${path.replace(/^\/+/, '')}` });
}

const OPENED = 'opened.';

/** A file of a sandbox's opening snapshot (`path` from the bundle's root: `workspace/…`). */
export function openingUri(key: string, path = ''): vscode.Uri {
  return vscode.Uri.from({ scheme: REVISION_SCHEME, authority: `${OPENED}${encodeURIComponent(key)}`, path: `/${path.replace(/^\/+/, '')}` });
}

/** What a `sandbox-revision:` authority names: a retained revision, or a sandbox's opening snapshot. */
type Source = { sessionId: string; revision: string } | { opened: SandboxRef };

function parseSource(authority: string): Source | undefined {
  if (!authority.startsWith(OPENED)) return parseRevisionAuthority(authority);
  try {
    const sandbox = parseSandboxKey(decodeURIComponent(authority.slice(OPENED.length)));
    return sandbox && { opened: sandbox };
  } catch {
    return undefined;
  }
}

export function parseRevisionAuthority(authority: string): { sessionId: string; revision: string } | undefined {
  const dot = authority.indexOf('.');
  if (dot <= 0) return undefined;
  const revision = authority.slice(0, dot);
  if (!/^r[1-9][0-9]*$/.test(revision)) return undefined;
  try {
    return { revision, sessionId: decodeURIComponent(authority.slice(dot + 1)) };
  } catch {
    return undefined;
  }
}

type Entry = { name: string; directory: boolean; size: number };

export class RevisionFileSystemProvider implements vscode.FileSystemProvider {
  private readonly emitter = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  readonly onDidChangeFile = this.emitter.event;
  /** Revisions never change: listings are cached for the life of the window. */
  private readonly listings = new Map<string, Promise<Map<string, Entry>>>();

  constructor(private readonly companion: CompanionClient) {}

  private target(uri: vscode.Uri): { source: Source; path: string } {
    const source = parseSource(uri.authority);
    if (!source) throw vscode.FileSystemError.FileNotFound(uri);
    return { source, path: uri.path.replace(/^\/+/, '').replace(/\/+$/, '') };
  }

  private listing(source: Source, dir: string): Promise<Map<string, Entry>> {
    const toMap = (r: { entries: Entry[] }) => new Map(r.entries.map((e) => [e.name, e]));
    // An opening snapshot is replaced when a newer sandbox takes the name: asked each time, not kept.
    if ('opened' in source) return this.companion.request('openings/list', { sandbox: source.opened, path: dir }).then(toMap);
    const key = `${source.revision}.${source.sessionId}/${dir}`;
    let cached = this.listings.get(key);
    if (!cached) {
      cached = this.companion.request('revisions/list', { sessionId: source.sessionId, revision: source.revision, path: dir }).then(toMap);
      this.listings.set(key, cached);
      cached.catch(() => this.listings.delete(key));
    }
    return cached;
  }

  private read(source: Source, path: string, offset: number): Promise<{ contents: string; truncated: boolean }> {
    return 'opened' in source
      ? this.companion.request('openings/read', { sandbox: source.opened, path, offset, length: READ_CHUNK })
      : this.companion.request('revisions/read', { sessionId: source.sessionId, revision: source.revision, path, offset, length: READ_CHUNK });
  }

  watch(): vscode.Disposable {
    return new vscode.Disposable(() => undefined);
  }

  async stat(uri: vscode.Uri): Promise<vscode.FileStat> {
    const t = this.target(uri);
    if (t.path === '') return { type: vscode.FileType.Directory, ctime: 0, mtime: 0, size: 0, permissions: vscode.FilePermission.Readonly };
    const slash = t.path.lastIndexOf('/');
    const entries = await this.listing(t.source, slash === -1 ? '' : t.path.slice(0, slash)).catch(() => {
      throw vscode.FileSystemError.FileNotFound(uri);
    });
    const entry = entries.get(t.path.slice(slash + 1));
    if (!entry) throw vscode.FileSystemError.FileNotFound(uri);
    return {
      type: entry.directory ? vscode.FileType.Directory : vscode.FileType.File,
      ctime: 0,
      mtime: 0,
      size: entry.size,
      permissions: vscode.FilePermission.Readonly,
    };
  }

  async readDirectory(uri: vscode.Uri): Promise<[string, vscode.FileType][]> {
    const t = this.target(uri);
    const entries = await this.listing(t.source, t.path).catch(() => {
      throw vscode.FileSystemError.FileNotFound(uri);
    });
    return [...entries.values()].map((e) => [e.name, e.directory ? vscode.FileType.Directory : vscode.FileType.File]);
  }

  async readFile(uri: vscode.Uri): Promise<Uint8Array> {
    const t = this.target(uri);
    const parts: Buffer[] = [];
    let offset = 0;
    for (;;) {
      const r = await this.read(t.source, t.path, offset).catch(() => {
        throw vscode.FileSystemError.FileNotFound(uri);
      });
      const chunk = Buffer.from(r.contents, 'base64');
      parts.push(chunk);
      offset += chunk.length;
      if (!r.truncated || chunk.length === 0) break;
    }
    return Buffer.concat(parts);
  }

  private readonlyError(): Error {
    return vscode.FileSystemError.NoPermissions('A revision is read-only; open it in a new sandbox to change it.');
  }
  writeFile(): never {
    throw this.readonlyError();
  }
  createDirectory(): never {
    throw this.readonlyError();
  }
  delete(): never {
    throw this.readonlyError();
  }
  rename(): never {
    throw this.readonlyError();
  }
}
