// .dependency-cruiser.cjs: the import rules of the folders by role, checked on the built dist/ by `npm run lint`.
const layer = (name, allowed) => ({
  name: `${name}-imports`,
  comment: `${name}/ may import only ${allowed.join(', ')}`,
  severity: 'error',
  from: { path: `^dist/${name}/` },
  to: { path: '^dist/', pathNot: allowed.map((a) => `^dist/${a}/`) },
});

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', from: {}, to: { circular: true } },
    layer('sys', ['sys']),
    layer('base', ['base', 'sys']),
    layer('tools', ['tools', 'base', 'sys']),
    layer('capture', ['capture', 'base', 'sys']),
    layer('store', ['store', 'capture', 'tools', 'base', 'sys']),
    {
      name: 'cli-uses-public-api',
      comment: 'the command uses the public API only (index.js, sys/index.js) and its own cli/ modules',
      severity: 'error',
      from: { path: '^dist/(cli\\.js$|cli/)' },
      to: { path: '^dist/', pathNot: ['^dist/index\\.js$', '^dist/sys/index\\.js$', '^dist/cli/'] },
    },
    {
      name: 'entry-points-are-not-imported',
      comment: 'worker.js, cli.js and internal.js are entry points: nothing in the library imports them',
      severity: 'error',
      from: { path: '^dist/' },
      to: { path: '^dist/(worker|cli|internal)\\.js$' },
    },
    { name: 'no-orphans', severity: 'error', from: { orphan: true, pathNot: ['\\.d\\.ts$', '^dist/(worker|cli|internal|index)\\.js$', '^dist/capture/pool-worker\\.js$', '^dist/sys/index\\.js$'] }, to: {} },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '\\.map$|\\.d\\.ts$' },
    moduleSystems: ['es6'],
  },
};
