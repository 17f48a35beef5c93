// arm-attacker.mjs: the agent in a hostile arm, as a process of its own. It answers one JSON line per
// request: `deep` builds a chain of directories too deep for one path (by chdir, a name at a time);
// `swap` starts swapping directories and files of the clone for symlinks to outside (and back) in a
// loop until `stop`, so a diff or reset runs while names change under it.
import { mkdirSync, renameSync, rmdirSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const out = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);
const quiet = (fn) => {
  try {
    fn();
    return true;
  } catch {
    return false;
  }
};

function deep({ dir, depth }) {
  const home = process.cwd();
  process.chdir(dir);
  try {
    for (let i = 0; i < depth; i++) {
      mkdirSync('d');
      process.chdir('d');
    }
    writeFileSync('bottom', 'the bottom of a deep tree\n');
  } finally {
    process.chdir(home);
  }
  return { made: depth };
}

let swapping = null;

/** One round: each dir goes aside and a link to outside takes its name, then the dir comes back; each file is replaced by a link, then by a file. */
function swapRound({ clone, dirs, files, dirTarget, fileTarget }, n) {
  for (const rel of dirs) {
    const abs = join(clone, rel);
    const aside = `${abs}.aside`;
    if (quiet(() => renameSync(abs, aside))) {
      quiet(() => symlinkSync(dirTarget, abs));
      quiet(() => unlinkSync(abs));
      if (!quiet(() => renameSync(aside, abs))) quiet(() => mkdirSync(abs));
    } else {
      // The reset moved it away: put a link there for a moment, then a directory.
      quiet(() => symlinkSync(dirTarget, abs));
      quiet(() => unlinkSync(abs));
      quiet(() => mkdirSync(abs));
      quiet(() => rmdirSync(aside));
    }
  }
  for (const rel of files) {
    const abs = join(clone, rel);
    quiet(() => symlinkSync(fileTarget, `${abs}.l`));
    quiet(() => renameSync(`${abs}.l`, abs));
    quiet(() => writeFileSync(`${abs}.f`, `version ${n}\n`));
    quiet(() => renameSync(`${abs}.f`, abs));
  }
}

function startSwap(args) {
  swapping = { args, count: 0, stop: false };
  const s = swapping;
  const loop = () => {
    if (s.stop) return;
    // a few rounds, then a millisecond off: names keep changing all through a call without taking a core
    for (let i = 0; i < 4; i++) swapRound(s.args, s.count++);
    setTimeout(loop, 1);
  };
  setTimeout(loop, 0);
  return { started: true };
}

function stopSwap() {
  if (swapping === null) return { stopped: true, count: 0 };
  swapping.stop = true;
  const { count } = swapping;
  swapping = null;
  return { stopped: true, count };
}

createInterface({ input: process.stdin }).on('line', (line) => {
  const msg = JSON.parse(line);
  try {
    if (msg.op === 'deep') out(deep(msg));
    else if (msg.op === 'swap') out(startSwap(msg));
    else if (msg.op === 'stop') out(stopSwap());
    else out({ error: `unknown op ${msg.op}` });
  } catch (err) {
    out({ error: String(err.message) });
  }
});
out({ ready: true, pid: process.pid });
