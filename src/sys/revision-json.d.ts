// revision-json.d.ts: the shape of native/revision.json, which native.ts imports (the bundle builds its number in).
declare module '*/native/revision.json' {
  const file: { readonly revision: number };
  export default file;
}
