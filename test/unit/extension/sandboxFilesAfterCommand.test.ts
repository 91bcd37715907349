// After a Sandbox terminal command, a read of a file the command made must see it at once — even
// while the window is still re-listing the folders the command may have touched (the integration
// terminal test once read `src/made.txt` from a listing taken before the command ran).
import assert from 'node:assert/strict';
import type { FileEntry } from '../../../protocol/kruntimes/gateway';
import type { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import type { LiveSandboxConnection } from '../../../extension/sandboxes/connection';
import { SandboxFiles } from '../../../extension/fs/sandboxFiles';

/** A sandbox's folders as the gateway lists them; a listing of a folder can be held until released. */
class FakeSandbox {
  readonly dirs = new Map<string, FileEntry[]>([
    ['', [{ path: 'src', directory: true }]],
    ['src', [{ path: 'a.txt', sizeBytes: 1 }]],
  ]);
  private readonly held = new Map<string, Promise<void>>();
  private readonly listedWaiters = new Map<string, () => void>();

  /** Resolves at the next listing of `dir` (once the folder has been read). */
  whenListed(dir: string): Promise<void> {
    return new Promise((resolve) => this.listedWaiters.set(dir, resolve));
  }

  /** Later listings of `dir` wait (after reading the folder) until the returned function is called. */
  hold(dir: string): () => void {
    let release!: () => void;
    this.held.set(dir, new Promise<void>((r) => (release = r)));
    return () => {
      this.held.delete(dir);
      release();
    };
  }

  client(): GatewayClient {
    const listPage = async ({ path }: { path: string }): Promise<{ entries: FileEntry[]; nextPageToken: string }> => {
      const entries = [...(this.dirs.get(path) ?? [])];
      this.listedWaiters.get(path)?.();
      this.listedWaiters.delete(path);
      await this.held.get(path);
      return { entries, nextPageToken: '' };
    };
    return { listPage } as unknown as GatewayClient;
  }

  connection(): LiveSandboxConnection {
    const client = this.client();
    return {
      key: 'local/sbx-test',
      label: 'sbx-test',
      client: () => Promise.resolve(client),
      invalidate: () => undefined,
      capabilities: () => undefined,
      phase: () => 'Ready',
      hold: () => ({ dispose: () => undefined }),
    } as unknown as LiveSandboxConnection;
  }
}

describe('sandbox files after a terminal command', () => {
  it('serves a file the command made in a subfolder while the workspace root is still being re-listed', async () => {
    const sandbox = new FakeSandbox();
    const files = new SandboxFiles(sandbox.connection(), { listingTtlMs: 60_000 });
    await files.readDirectory(''); // the Explorer shows the root
    await files.stat('src/a.txt'); // and has listed 'src'

    sandbox.dirs.get('src')?.push({ path: 'made.txt', sizeBytes: 3 }); // `touch src/made.txt`
    const releaseRoot = sandbox.hold('');
    const announced = files.commandRanIn('');
    try {
      const info = await files.stat('src/made.txt');
      assert.equal(info.type, 'file');
      assert.equal(info.size, 3);
    } finally {
      releaseRoot();
    }
    await announced;
  });

  it('does not keep a listing that was read before the command changed the folder', async () => {
    const sandbox = new FakeSandbox();
    const files = new SandboxFiles(sandbox.connection(), { listingTtlMs: 60_000 });
    await files.stat('src/a.txt');
    await files.commandRanIn(''); // an earlier command: the 'src' listing is fresh again below

    const releaseSrc = sandbox.hold('src');
    const srcRead = sandbox.whenListed('src');
    const early = files.commandRanIn('src');
    await srcRead; // its listing of 'src' has read the folder and is still in flight
    sandbox.dirs.get('src')?.push({ path: 'late.txt', sizeBytes: 4 }); // the next command writes
    const next = files.commandRanIn('src');
    releaseSrc();
    await Promise.all([early, next]);

    const info = await files.stat('src/late.txt');
    assert.equal(info.size, 4);
  });
});
