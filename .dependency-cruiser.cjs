// .dependency-cruiser.cjs: the import rules of the folders by role, checked on tsc's unbundled output (tsc-out/) by `npm run lint`.
const layer = (name, allowed) => ({
  name: `${name}-imports`,
  comment: `${name}/ may import only ${allowed.join(', ')}`,
  severity: 'error',
  from: { path: `^tsc-out/${name}/` },
  to: { path: '^tsc-out/', pathNot: allowed.map((a) => `^tsc-out/${a}/`) },
});

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', from: {}, to: { circular: true } },
    layer('sys', ['sys']),
    layer('base', ['base', 'sys']),
    layer('tools', ['tools', 'files', 'base', 'sys']),
    layer('files', ['files', 'base', 'sys']),
    layer('capture', ['capture', 'files', 'base', 'sys']),
    layer('store', ['store', 'capture', 'files', 'tools', 'base', 'sys']),
    {
      name: 'cli-uses-public-api',
      comment: 'the command uses the public API only (index.js, sys/index.js) and its own cli/ modules',
      severity: 'error',
      from: { path: '^tsc-out/(cli\\.js$|cli/)' },
      to: { path: '^tsc-out/', pathNot: ['^tsc-out/index\\.js$', '^tsc-out/sys/index\\.js$', '^tsc-out/cli/'] },
    },
    {
      name: 'entry-points-are-not-imported',
      comment: 'worker.js, cli.js and internal.js are entry points: nothing in the library imports them',
      severity: 'error',
      from: { path: '^tsc-out/' },
      to: { path: '^tsc-out/(worker|cli|internal)\\.js$' },
    },
    { name: 'no-orphans', severity: 'error', from: { orphan: true, pathNot: ['\\.d\\.ts$', '^tsc-out/(worker|cli|internal|index)\\.js$', '^tsc-out/files/pool-worker\\.js$', '^tsc-out/sys/index\\.js$'] }, to: {} },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '\\.map$|\\.d\\.ts$' },
    moduleSystems: ['es6'],
  },
};
