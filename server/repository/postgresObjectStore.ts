// The postgres adapter's object store: content-addressed rows (`objects`) with their bytes as bytea
// chunks (`object_chunks`, 1 MiB each). Publish streams the source in one transaction, holding at
// most one chunk in memory and verifying size and digest before COMMIT; reads stream chunk batches
// and re-verify. Revisions and forks reference objects by foreign key, so the database itself
// refuses to delete an object that is still referenced.
// What this process has verified (its own upload, or a full read) is remembered by the row versions of the object's
// chunks — their count and `xmin`s, which any UPDATE, DELETE or re-INSERT of a chunk changes, as an inode's stat key
// does for the file store — so the checks a commit repeats (after publishing, inside the commit's transaction, at
// the next checkout) read the chunks' bytes again only when the rows are no longer the ones verified.
import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Pool, PoolClient, QueryResult, QueryResultRow } from 'pg';
import type { ImmutableObjectRef } from '../../protocol/repository';
import { DigestMeter, discard } from './digestMeter';
import { SessionRepositoryError, toRepositoryError } from './errors';
import { materializeFromStream } from './materialize';
import {
  canonicalObjectId,
  checkMaxBytes,
  checkPublishInput,
  type ImmutableObjectStore,
  type MaterializedObject,
  type MaterializeObjectInput,
  objectIdFor,
  type PublishObjectInput,
} from './objectStore';

export const POSTGRES_OBJECT_REF_SCHEME = 'sandbox-sessions-postgres-object://v1/';
export const CHUNK_BYTES = 1024 * 1024;
/** Chunks fetched per query while reading; with one batch prefetched, at most 2 × READ_BATCH chunks are in memory. */
const READ_BATCH = 4;
/** Objects whose verification is remembered (oldest forgotten first); a few hundred bytes each. */
const MAX_REMEMBERED = 4096;

/** Runs one query: on the pool, or on a transaction's own connection. */
type RunQuery = <R extends QueryResultRow>(text: string, values: unknown[]) => Promise<QueryResult<R>>;

export class PostgresObjectStore implements ImmutableObjectStore {
  /** Object id → the row versions of its chunks when this process last verified its bytes (`chunkVersions`). */
  private readonly verified = new Map<string, string>();

  constructor(
    private readonly pool: Pool,
    /** Quoted schema name. */
    private readonly S: string,
  ) {}

  objectIdOf(ref: ImmutableObjectRef): string {
    return canonicalObjectId(ref, POSTGRES_OBJECT_REF_SCHEME);
  }

  private readonly onPool: RunQuery = <R extends QueryResultRow>(text: string, values: unknown[]) => this.pool.query<R>(text, values);

  async publish(input: PublishObjectInput): Promise<ImmutableObjectRef> {
    checkPublishInput(input);
    const id = objectIdFor(input.digest, input.mediaType);
    const ref: ImmutableObjectRef = {
      objectRef: `${POSTGRES_OBJECT_REF_SCHEME}${id}`,
      digest: input.digest,
      bytes: input.bytes,
      mediaType: input.mediaType,
    };
    const client = await this.pool.connect();
    let inserted: boolean | undefined;
    try {
      await client.query('BEGIN');
      // Insert, or only touch an existing row (so a GC grace window sees it in use). A concurrent
      // publisher of the same id waits here until the first one commits or rolls back.
      const { rows } = await client.query<{ inserted: boolean }>(
        `INSERT INTO ${this.S}.objects (object_id, digest, media_type, bytes, chunk_size) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (object_id) DO UPDATE SET touched_at = now() RETURNING (xmax = 0) AS inserted`,
        [id, input.digest, input.mediaType, input.bytes, CHUNK_BYTES],
      );
      inserted = rows[0]?.inserted === true;
      let uploaded: string | undefined;
      if (inserted) {
        await this.upload(client, id, input);
        uploaded = await this.chunkVersions((text, values) => client.query(text, values), id);
      }
      await client.query('COMMIT');
      if (uploaded !== undefined) this.remember(id, uploaded);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw toRepositoryError(err, `publishing object ${input.digest}`);
    } finally {
      client.release();
    }
    // Our own upload was verified before COMMIT; an object someone else stored is verified now.
    if (inserted !== true) await this.assertReadable(ref);
    return ref;
  }

  private async upload(client: PoolClient, id: string, input: PublishObjectInput): Promise<void> {
    const meter = new DigestMeter(input.bytes, `object source for ${input.digest}`);
    const source =
      input.source.kind === 'file'
        ? createReadStream(input.source.path, { highWaterMark: CHUNK_BYTES })
        : Readable.from([Buffer.from(input.source.value)]);
    let seq = 0;
    const insert = (data: Buffer) =>
      client.query(`INSERT INTO ${this.S}.object_chunks (object_id, seq, data) VALUES ($1, $2, $3)`, [id, seq++, data]);
    await pipeline(source, meter, async (chunks: AsyncIterable<Buffer>) => {
      let pending: Buffer[] = [];
      let pendingBytes = 0;
      for await (const chunk of chunks) {
        let rest = chunk;
        while (rest.length > 0) {
          const take = Math.min(rest.length, CHUNK_BYTES - pendingBytes);
          pending.push(rest.subarray(0, take));
          pendingBytes += take;
          rest = rest.subarray(take);
          if (pendingBytes === CHUNK_BYTES) {
            await insert(Buffer.concat(pending));
            pending = [];
            pendingBytes = 0;
          }
        }
      }
      if (pendingBytes > 0 || seq === 0) await insert(Buffer.concat(pending));
    });
    meter.verify(input.digest);
  }

  assertReadable(ref: ImmutableObjectRef): Promise<void> {
    return this.verifyVia(this.onPool, ref);
  }

  /** assertReadable on a transaction's own connection (never waits for a second pool connection). */
  assertReadableWith(client: PoolClient, ref: ImmutableObjectRef): Promise<void> {
    return this.verifyVia(<R extends QueryResultRow>(text: string, values: unknown[]) => client.query<R>(text, values), ref);
  }

  private async verifyVia(run: RunQuery, ref: ImmutableObjectRef): Promise<void> {
    try {
      const id = await this.checkedId(run, ref);
      // Taken before the bytes are read: a change after this makes it differ from what is remembered.
      const versions = await this.chunkVersions(run, id);
      if (this.verified.get(id) === versions) return;
      this.verified.delete(id);
      const meter = new DigestMeter(ref.bytes, `object ${ref.objectRef}`);
      await pipeline(Readable.from(this.chunks(run, id, ref)), meter, discard());
      meter.verify(ref.digest);
      this.remember(id, versions);
    } catch (err) {
      throw toRepositoryError(err, `reading object ${ref.objectRef}`);
    }
  }

  /** The object's chunk rows as they are now: their count and the distinct transactions that wrote them (`xmin`). */
  private async chunkVersions(run: RunQuery, id: string): Promise<string> {
    const { rows } = await run<{ n: number; xmins: string | null }>(
      `SELECT count(*)::int AS n, string_agg(DISTINCT xmin::text, ',' ORDER BY xmin::text) AS xmins FROM ${this.S}.object_chunks WHERE object_id = $1`,
      [id],
    );
    return `${rows[0]?.n ?? 0}:${rows[0]?.xmins ?? ''}`;
  }

  private remember(id: string, versions: string): void {
    this.verified.delete(id);
    this.verified.set(id, versions);
    if (this.verified.size > MAX_REMEMBERED) this.verified.delete(this.verified.keys().next().value as string);
  }

  async materialize(input: MaterializeObjectInput): Promise<MaterializedObject> {
    checkMaxBytes(input.maxBytes);
    const { ref } = input;
    this.objectIdOf(ref);
    if (ref.bytes > input.maxBytes) {
      throw new SessionRepositoryError('quota_exceeded', `object ${ref.objectRef} has ${ref.bytes} bytes, more than the limit of ${input.maxBytes}`);
    }
    return materializeFromStream(input, async () => Readable.from(this.chunks(this.onPool, await this.checkedId(this.onPool, ref), ref), { objectMode: false }));
  }

  /** The id of a stored object whose recorded size, digest and media type match the ref. */
  private async checkedId(run: RunQuery, ref: ImmutableObjectRef): Promise<string> {
    const id = this.objectIdOf(ref);
    const { rows } = await run<{ bytes: string; digest: string; media_type: string }>(
      `SELECT bytes::text AS bytes, digest, media_type FROM ${this.S}.objects WHERE object_id = $1`,
      [id],
    );
    const row = rows[0];
    if (!row) {
      throw new SessionRepositoryError('object_not_found', `object ${ref.objectRef} is not in the repository (it was never published or has been garbage-collected)`);
    }
    if (Number(row.bytes) !== ref.bytes || row.digest !== ref.digest || row.media_type !== ref.mediaType) {
      throw new SessionRepositoryError('integrity_mismatch', `object ${ref.objectRef} is stored as ${row.bytes} bytes ${row.digest}, expected ${ref.bytes} bytes ${ref.digest}`);
    }
    return id;
  }

  /**
   * The object's chunks in order, READ_BATCH per query, the next batch fetched while the current
   * one is consumed; missing or extra chunks are integrity_mismatch.
   */
  private async *chunks(run: RunQuery, id: string, ref: ImmutableObjectRef): AsyncGenerator<Buffer> {
    const fetch = (from: number) =>
      // Text result format: pg decodes bytea hex into a Buffer natively. (Per-query binary results
      // come back as utf-8 strings unless the whole client is in binary mode — never use them.)
      run<{ seq: number; data: Buffer }>(
        `SELECT seq, data FROM ${this.S}.object_chunks WHERE object_id = $1 AND seq >= $2 AND seq < $3 ORDER BY seq`,
        [id, from, from + READ_BATCH],
      );
    let next = 0;
    let seen = 0;
    let pending: ReturnType<typeof fetch> | undefined = fetch(0);
    try {
      while (pending) {
        const { rows } = await pending;
        pending = undefined;
        const complete = rows.length === READ_BATCH && rows.every((row, i) => row.seq === next + i && Buffer.isBuffer(row.data));
        if (complete) {
          pending = fetch(next + READ_BATCH);
          pending.catch(() => undefined); // awaited on the next turn; never an unhandled rejection
        }
        for (const row of rows) {
          if (row.seq !== next || !Buffer.isBuffer(row.data)) break;
          next++;
          seen += row.data.length;
          yield row.data;
        }
        if (!complete) break;
      }
    } finally {
      await pending?.catch(() => undefined);
    }
    if (seen !== ref.bytes) {
      throw new SessionRepositoryError('integrity_mismatch', `object ${ref.objectRef} has ${seen} bytes in its chunks, expected ${ref.bytes}`);
    }
  }
}
