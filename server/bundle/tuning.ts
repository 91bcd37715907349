// Thresholds of the codec's fast paths. Not options: they never change what is written or accepted, only which
// threads do the work. Tests lower them to drive the threaded paths with small fixtures.
import { availableParallelism } from 'node:os';

export const bundleTuning = {
  /** Worker threads hashing sources in pack's first pass (besides the calling thread): one per extra core, ≤ 3. */
  hashWorkers: Math.max(0, Math.min(availableParallelism() - 1, 3)),
  /** Queued source bytes from which the hashing workers start (starting threads costs ~40 ms). */
  parallelHashMinBytes: 16 * 1024 * 1024,
  /** Tar bytes from which pack compresses, hashes and writes the archive on a worker thread. */
  workerWriterMinTarBytes: 16 * 1024 * 1024,
  /** Bundle (compressed) bytes from which inspect/hydrate read, check and decompress on a worker thread. */
  workerReaderMinBytes: 8 * 1024 * 1024,
  /**
   * Hydrate's file writers when the reader runs on a worker thread; each creates, writes, fsyncs and closes whole
   * files, so this is also how many fsyncs are in flight (they wait for the disk, not the CPU).
   */
  fileWriters: 3,
  /**
   * Hydrate's file writers when nothing is fsynced (`durable` false: an activation's throw-away sandbox): then the
   * writers only fill the page cache, CPU work that threads beyond the spare cores slow down (2 cores, loaded, 100 MB
   * / 400 files, interleaved: 1 writer 0.9 s, 3 writers 1.15 s per hydrate). One per extra core, at most 3.
   */
  fileWritersNotDurable: Math.max(1, Math.min(availableParallelism() - 1, 3)),
  /** Small bundles: worker threads fsyncing files, started once more than `syncWorkersAfterFiles` were written. */
  syncWorkers: 4,
  syncWorkersAfterFiles: 64,
  /**
   * How long a codec thread whose job ended stays for the next job of this process (codecThreads.ts); 0 ends it at
   * once. Idle threads are unref'd: they never keep a process alive.
   */
  idleThreadMs: 60_000,
};
