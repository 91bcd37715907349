// A deterministic USTAR stream of a directory tree, for directory artifacts: entries in
// byte-wise path order, mtime 0, uid/gid 0, no user/group names, modes normalised to
// 0644/0755. The same tree always gives the same bytes (and, gzipped by Node, the same
// tar.gz), so an artifact's digest depends on its content only.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { SandboxSessionsError } from '../../protocol/errors';

export class TarError extends SandboxSessionsError<'artifact_invalid'> {
  override readonly name = 'TarError';
  readonly service = 'artifact';
  constructor(message: string) {
    super('artifact_invalid', message);
  }
}

interface TarEntry {
  name: string;
  abs: string;
  type: 'file' | 'dir' | 'symlink';
  size: number;
  mode: number;
  linkname: string;
}

function byteCompare(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

async function collect(root: string, rel: string, out: TarEntry[]): Promise<void> {
  const names = (await fsp.readdir(path.join(root, rel))).sort(byteCompare);
  for (const name of names) {
    const childRel = rel === '' ? name : `${rel}/${name}`;
    const abs = path.join(root, childRel);
    const st = await fsp.lstat(abs);
    const exec = (st.mode & 0o111) !== 0;
    if (st.isDirectory()) {
      out.push({ name: childRel + '/', abs, type: 'dir', size: 0, mode: 0o755, linkname: '' });
      await collect(root, childRel, out);
    } else if (st.isFile()) {
      out.push({ name: childRel, abs, type: 'file', size: st.size, mode: exec ? 0o755 : 0o644, linkname: '' });
    } else if (st.isSymbolicLink()) {
      out.push({ name: childRel, abs, type: 'symlink', size: 0, mode: 0o777, linkname: await fsp.readlink(abs) });
    } else {
      throw new TarError(`${childRel} is not a regular file, directory or symlink`);
    }
  }
}

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function splitName(name: string): { prefix: string; base: string } {
  const bytes = Buffer.byteLength(name);
  if (bytes <= 100) return { prefix: '', base: name };
  for (let i = name.length - 1; i > 0; i--) {
    if (name[i] !== '/') continue;
    const prefix = name.slice(0, i);
    const base = name.slice(i + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(base) <= 100 && base !== '') return { prefix, base };
  }
  throw new TarError(`path ${name} is too long for a USTAR archive`);
}

function header(entry: TarEntry): Buffer {
  const block = Buffer.alloc(512);
  const { prefix, base } = splitName(entry.name);
  if (Buffer.byteLength(entry.linkname) > 100) throw new TarError(`symlink target of ${entry.name} is too long`);
  block.write(base, 0, 100, 'utf8');
  block.write(octal(entry.mode, 8), 100, 'ascii');
  block.write(octal(0, 8), 108, 'ascii');
  block.write(octal(0, 8), 116, 'ascii');
  block.write(octal(entry.size, 12), 124, 'ascii');
  block.write(octal(0, 12), 136, 'ascii');
  block.write('        ', 148, 'ascii');
  block.write(entry.type === 'dir' ? '5' : entry.type === 'symlink' ? '2' : '0', 156, 'ascii');
  block.write(entry.linkname, 157, 100, 'utf8');
  block.write('ustar\0', 257, 'ascii');
  block.write('00', 263, 'ascii');
  block.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const b of block) sum += b;
  block.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 'ascii');
  return block;
}

/** Yields the archive's bytes; files are streamed, never loaded whole. */
export async function* tarDirectory(root: string): AsyncGenerator<Buffer> {
  const entries: TarEntry[] = [];
  await collect(root, '', entries);
  for (const entry of entries) {
    yield header(entry);
    if (entry.type !== 'file') continue;
    let written = 0;
    for await (const chunk of fs.createReadStream(entry.abs)) {
      const buf = chunk as Buffer;
      const part = written + buf.length > entry.size ? buf.subarray(0, entry.size - written) : buf;
      written += part.length;
      yield part;
      if (written >= entry.size) break;
    }
    if (written < entry.size) throw new TarError(`${entry.name} shrank while it was archived`);
    const pad = (512 - (entry.size % 512)) % 512;
    if (pad) yield Buffer.alloc(pad);
  }
  yield Buffer.alloc(1024);
}
