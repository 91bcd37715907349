// The file adapter's list of released objects that were too young to delete when their revision was dropped (the GC
// grace period protects an object a writer may have just published again). Without it, a session committing faster
// than one revision per grace period / keepRevisions (15 min / 20: 45 s) would leave every dropped bundle on disk
// until someone ran `session gc`. One empty file per object id under `gc-pending/`: outside the state document, so it
// costs the state's writes nothing, and a reader of an older version ignores it. Losing an entry only leaves an object
// for the full collection; an entry for an object that is gone or referenced again is dropped. PostgreSQL keeps the
// same list in its `gc_pending` table (postgresSchema.ts).
import fs from 'node:fs/promises';
import path from 'node:path';
import { errnoCode, removeIfPresent } from './durableFs';

const OBJECT_ID = /^[0-9a-f]{64}$/;

export class DeferredGarbage {
  private readonly dir: string;

  constructor(storageRoot: string) {
    this.dir = path.join(storageRoot, 'gc-pending');
  }

  async list(): Promise<string[]> {
    try {
      return (await fs.readdir(this.dir)).filter((name) => OBJECT_ID.test(name));
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return [];
      throw err;
    }
  }

  async remember(id: string): Promise<void> {
    if (!OBJECT_ID.test(id)) throw new TypeError(`not an object id: ${id}`);
    await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
    try {
      await fs.writeFile(path.join(this.dir, id), '', { flag: 'wx', mode: 0o600 });
    } catch (err) {
      if (errnoCode(err) !== 'EEXIST') throw err;
    }
  }

  async forget(id: string): Promise<void> {
    if (OBJECT_ID.test(id)) await removeIfPresent(path.join(this.dir, id));
  }
}
