declare module "elk-worker-source" {
  const source: string;
  export default source;
}
