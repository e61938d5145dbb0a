// Runs one JavaScript/TypeScript job inside a Web Worker the sandbox process starts with no
// permissions (network only when the job allows it). The executed module's default export
// (awaited) is the result; console output becomes logs; the thread's files are an in-memory
// map exposed as the global `files`, and what it holds at the end is sent back.
type Files = Record<string, string>;

function b64decode(text: string): Uint8Array {
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function b64encode(bytes: Uint8Array): string {
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(bin);
}

function normalize(path: string): string {
  const parts = String(path).split("/").filter((p) => p && p !== ".");
  if (parts.length === 0 || parts.includes("..")) throw new TypeError(`invalid file path ${JSON.stringify(path)}`);
  return parts.join("/");
}

function show(value: unknown): string {
  if (typeof value === "string") return value;
  try {
    return Deno.inspect(value, { depth: 4 });
  } catch {
    return String(value);
  }
}

// deno-lint-ignore no-explicit-any
const post = (self as any).postMessage.bind(self) as (data: unknown) => void;

self.onmessage = async (event: MessageEvent) => {
  const job = event.data as { code: string; language: string; files: Files };
  const store = new Map<string, Uint8Array>();
  for (const [name, data] of Object.entries(job.files)) store.set(name, b64decode(data));
  const fileApi = {
    list: (): string[] => [...store.keys()].sort(),
    exists: (path: string): boolean => store.has(normalize(path)),
    read: (path: string): Uint8Array | undefined => store.get(normalize(path)),
    readText: (path: string): string | undefined => {
      const data = store.get(normalize(path));
      return data === undefined ? undefined : new TextDecoder().decode(data);
    },
    write: (path: string, data: string | Uint8Array): void => {
      store.set(normalize(path), typeof data === "string" ? new TextEncoder().encode(data) : new Uint8Array(data));
    },
    delete: (path: string): boolean => store.delete(normalize(path)),
  };
  Object.defineProperty(globalThis, "files", { value: Object.freeze(fileApi) });
  const log = (stream: string) => (...args: unknown[]) =>
    post({ kind: "log", stream, message: args.map(show).join(" ") });
  for (const name of ["log", "info", "debug", "trace"] as const) console[name] = log("stdout");
  for (const name of ["error", "warn"] as const) console[name] = log("stderr");

  const mime = job.language === "typescript" ? "application/typescript" : "application/javascript";
  const url = `data:${mime};base64,${b64encode(new TextEncoder().encode(job.code))}`;
  const collect = (): Files => {
    const out: Files = {};
    for (const [name, data] of store) out[name] = b64encode(data);
    return out;
  };
  try {
    const mod = await import(url);
    let result = await mod.default;
    if (result !== undefined) {
      try {
        result = JSON.parse(JSON.stringify(result));
      } catch {
        result = show(result);
      }
    }
    post({ kind: "done", ok: true, result: result ?? null, files: collect() });
  } catch (err) {
    const e = err instanceof Error ? err : new Error(show(err));
    post({ kind: "done", ok: false, name: e.name, message: e.message, stack: e.stack ?? "", files: collect() });
  }
};
