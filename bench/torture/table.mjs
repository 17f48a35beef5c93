// table.mjs: the suite's rows (kind, fs, mode, trials, violations) and how they are printed.
const rows = [];

export function row(kind, fs, mode) {
  const r = { kind, fs, mode, trials: 0, passed: 0, refused: 0, violations: 0, details: [], codes: new Map() };
  rows.push(r);
  return r;
}

/** Counts one trial: `bad` is a list of violation messages (empty: it held). */
export function count(r, bad, { refusedCode, label } = {}) {
  r.trials++;
  if (refusedCode !== undefined) {
    r.refused++;
    r.codes.set(refusedCode, (r.codes.get(refusedCode) ?? 0) + 1);
  } else r.passed++;
  if (bad.length > 0) {
    r.violations++;
    r.details.push(`${label ?? `trial ${r.trials}`}: ${bad.join('; ')}`);
  }
}

/** Records a violation found outside any one trial (after a round or a run), counting no trial. */
export function flag(r, bad, label) {
  r.violations++;
  r.details.push(`${label}: ${bad.join('; ')}`);
}

export function allRows() {
  return rows;
}

export function totalViolations() {
  return rows.reduce((n, r) => n + r.violations, 0);
}

/** A Markdown table, then the violations (all of them, or the first `maxDetails` per row). */
export function render({ maxDetails = Infinity } = {}) {
  const head = ['kind', 'fs', 'mode', 'trials', 'ok', 'typed error', 'violations'];
  const body = rows.map((r) => [r.kind, r.fs, r.mode, r.trials, r.passed, r.refused, r.violations].map(String));
  const width = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells) => `| ${cells.map((c, i) => c.padEnd(width[i])).join(' | ')} |`;
  const out = [line(head), `|${width.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...body.map(line)];
  const total = rows.reduce((a, r) => [a[0] + r.trials, a[1] + r.violations], [0, 0]);
  out.push('', `${total[0]} trials, ${total[1]} violations`);
  const codes = new Map();
  for (const r of rows) for (const [c, n] of r.codes) codes.set(c, (codes.get(c) ?? 0) + n);
  if (codes.size > 0) out.push(`typed errors seen: ${[...codes].sort((a, b) => b[1] - a[1]).map(([c, n]) => `${c} ${n}`).join(', ')}`);
  for (const r of rows) {
    if (r.details.length === 0) continue;
    out.push('', `violations in ${r.kind} / ${r.fs} / ${r.mode}:`);
    for (const d of r.details.slice(0, maxDetails)) out.push(`  - ${d}`);
    if (r.details.length > maxDetails) out.push(`  - ... ${r.details.length - maxDetails} more`);
  }
  return out.join('\n');
}
