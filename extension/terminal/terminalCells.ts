// Terminal cell arithmetic for the Sandbox terminal's line editor: how wide a character is on screen (wide
// East Asian characters take two cells, control characters and combining marks none), and where a prompt and
// a line end up once the terminal wraps them at its width. Pure, apart from LineEditor so it is read alone.

/** Display width of a string in terminal cells (wide East Asian characters count 2). */
export function displayWidth(text: string): number {
  let width = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0) ?? 0;
    if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) continue;
    if (cp >= 0x300 && cp <= 0x36f) continue; // combining marks
    width += isWide(cp) ? 2 : 1;
  }
  return width;
}

/** Display width of one character (0 for control characters and combining marks). */
export function charWidth(ch: string): number {
  const cp = ch.codePointAt(0) ?? 0;
  if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) return 0;
  if (cp >= 0x300 && cp <= 0x36f) return 0;
  return isWide(cp) ? 2 : 1;
}

/** The visible characters of text that may hold SGR and other CSI sequences (a coloured prompt). */
export function visibleChars(text: string): string[] {
  // eslint-disable-next-line no-control-regex -- the prompt carries colour sequences
  return [...text.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, '')];
}

/** A cell position relative to the first cell of the prompt. */
export interface Cell {
  row: number;
  col: number;
}

function isWide(cp: number): boolean {
  return (
    (cp >= 0x1100 && cp <= 0x115f) ||
    (cp >= 0x2e80 && cp <= 0xa4cf) ||
    (cp >= 0xac00 && cp <= 0xd7a3) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0xfe30 && cp <= 0xfe4f) ||
    (cp >= 0xff00 && cp <= 0xff60) ||
    (cp >= 0xffe0 && cp <= 0xffe6) ||
    (cp >= 0x1f300 && cp <= 0x1faff) ||
    (cp >= 0x20000 && cp <= 0x3fffd)
  );
}

/**
 * Where the line's end and the cursor are, in cells from the prompt's first cell, as the terminal wraps them
 * at `columns` (0: unlimited): a character that does not fit on a row (a wide one at the last column) starts
 * the next row. `end.pendingWrap`: the text ends exactly at the last column — the end is given as the next
 * row's first cell, where the terminal puts the cursor once it wraps.
 */
export function layoutLine(
  promptChars: readonly string[],
  chars: readonly string[],
  cursorIndex: number,
  columns: number,
): { end: Cell & { pendingWrap: boolean }; cursor: Cell } {
  const cols = columns || Number.MAX_SAFE_INTEGER;
  let row = 0;
  let col = 0;
  let cursor: Cell | undefined;
  const place = (ch: string, index: number | undefined) => {
    const w = charWidth(ch);
    if (w > 0 && col + w > cols) {
      row += 1;
      col = 0;
    }
    if (index === cursorIndex && cursor === undefined) cursor = { row, col };
    col += w;
  };
  for (const ch of promptChars) place(ch, undefined);
  chars.forEach((ch, i) => place(ch, i));
  const pendingWrap = col > 0 && col >= cols;
  const end = pendingWrap ? { row: row + 1, col: 0, pendingWrap } : { row, col, pendingWrap };
  return { end, cursor: cursor ?? { row: end.row, col: end.col } };
}
