// Runs one job inside a Web Worker that the sandbox process starts for it and terminates
// after it, with every permission off (network only when the job allows it).
//
// JavaScript/TypeScript: the executed module's default export (awaited) is the result;
// console output becomes logs; the thread's files are an in-memory map exposed as the
// global `files`, and what it holds at the end is sent back.
//
// Python: a worker first restores a fresh Pyodide from the process's memory snapshot
// ("boot"; it may read the Pyodide package until then, and revokes that before answering),
// then runs one job ("python"): the thread's files in /workspace, the value of the last
// expression as the result. A worker asked for "snapshot" loads Pyodide, defines the
// helpers below and answers with the snapshot every later interpreter starts from.
//
// Messages to the parent: {kind: "log", stream, message} while the job runs (up to the
// job's output limits), then one {kind: "done", ...}. The job's own code can post too; the
// parent checks what it takes.
import type { PyodideInterface } from "npm:pyodide@0.29.3";

type Files = Record<string, string>;
interface Limits { maxLogChars: number; maxLogLines: number; maxFileBytes: number }

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
const post = (self as any).postMessage.bind(self) as (data: unknown, transfer?: Transferable[]) => void;

/** Output of the running job, posted until it passes the job's limits (the parent notes the cut). */
const output = { active: false, full: false, chars: 0, lines: 0, maxChars: 0, maxLines: 0 };

function start(limits: Limits): void {
  Object.assign(output, { active: true, full: false, chars: 0, lines: 0, maxChars: limits.maxLogChars,
                          maxLines: limits.maxLogLines });
}

function emit(stream: "stdout" | "stderr", message: string): void {
  if (!output.active || output.full) return;
  output.chars += message.length + 1;
  output.lines += 1;
  output.full = output.chars > output.maxChars || output.lines >= output.maxLines;
  post({ kind: "log", stream, message });
}

/** The job's code may end this worker itself (`Deno.exit`, `close`): report it first, or the
 * parent would only learn of it at the job's time limit. */
function reportExits(files: () => Files): void {
  const exit = Deno.exit;
  // deno-lint-ignore no-explicit-any
  const scope = self as any;
  const close = scope.close.bind(self);
  const ended = (how: string) =>
    post({ kind: "done", ok: false, name: "SandboxExit", message: `the code ended its sandbox with ${how}`,
           stack: "", files: files() });
  Object.assign(Deno, { exit: (code?: number) => (ended(`Deno.exit(${code ?? ""})`), exit(code)) });
  scope.close = () => (ended("close()"), close());
}

function failure(err: unknown, files: Files): Record<string, unknown> {
  const e = err instanceof Error ? err : new Error(show(err));
  return { kind: "done", ok: false, name: e.name, message: e.message, stack: e.stack ?? "", files };
}

// ---------------------------------------------------------------- Python (Pyodide)

const WORKSPACE = "/workspace";

// Defined once, before the snapshot: every job's interpreter starts with these as they are here.
const PY_SETUP = `
import json, os, sys, traceback
from pyodide.code import eval_code_async

_sa_path = list(sys.path)

def _sa_enter(workspace):
    os.makedirs(workspace, exist_ok=True)
    os.chdir(workspace)
    sys.path[:] = [workspace, *_sa_path]
    if "random" in sys.modules:  # restored from the snapshot: reseed, or every job draws the same
        sys.modules["random"].seed()

def _sa_files(workspace, limit):
    """The workspace's files (path -> base64) as JSON, or None once they pass limit bytes."""
    import base64
    out, size = {}, 0
    for root, _dirs, names in os.walk(workspace):
        for name in names:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, workspace)
            try:
                with open(full, "rb") as fh:
                    data = fh.read(max(0, limit - size) + 1)
            except OSError:
                continue
            size += len(rel) + len(data)
            if size > limit:
                return None
            out[rel] = base64.b64encode(data).decode()
    return json.dumps(out)

async def _sa_run(code):
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        value = await eval_code_async(code, namespace, filename="<run_code>")
    except BaseException as exc:
        if isinstance(exc, SystemExit) and exc.code in (None, 0):
            return json.dumps({"ok": True, "resultJson": "null"})
        frames = traceback.extract_tb(exc.__traceback__)
        frames = [f for f in frames if f.filename == "<run_code>"]
        stack = "Traceback (most recent call last):\\n" + "".join(traceback.format_list(frames))
        stack += "".join(traceback.format_exception_only(type(exc), exc))
        return json.dumps({"ok": False, "name": type(exc).__name__, "message": str(exc), "stack": stack})
    # the result stays JSON text end to end, so Python's types (5.0, not 5) arrive intact
    try:
        return json.dumps({"ok": True, "resultJson": json.dumps(value, allow_nan=False)})
    except (TypeError, ValueError):
        return json.dumps({"ok": True, "resultJson": json.dumps(repr(value))})
`;

let python: PyodideInterface | null = null;

// imported on use, so a JavaScript job's worker doesn't load Pyodide's module
async function loadPyodide(config: Parameters<typeof import("npm:pyodide@0.29.3").loadPyodide>[0]) {
  const pyodide = await import("npm:pyodide@0.29.3");
  return await pyodide.loadPyodide(config);
}

/** Run the job path once on nothing, so a job doesn't pay for first-use work: before the
 * snapshot, for the modules it imports; after a boot, for this isolate's compiled code. */
async function rehearse(py: PyodideInterface): Promise<void> {
  py.FS.mkdirTree("/rehearsal");
  py.globals.get("_sa_enter")("/rehearsal");
  await py.globals.get("_sa_run")("import sys\nprint(end='')\n[1, 2.0, 'three']");
  py.globals.get("_sa_files")("/rehearsal", 0);
  py.runPython("import os\nos.chdir('/')\nos.rmdir('/rehearsal')");
}

async function makeSnapshot(): Promise<void> {
  const py = await loadPyodide({ _makeSnapshot: true, stdin: () => null });
  py.runPython(PY_SETUP);
  await rehearse(py);
  const snapshot = py.makeMemorySnapshot();
  post({ kind: "snapshot", snapshot }, [snapshot.buffer as ArrayBuffer]);
}

async function boot(message: { snapshot: Uint8Array; network: boolean }): Promise<void> {
  python = await loadPyodide({
    _loadSnapshot: message.snapshot,
    stdin: () => null,
    stdout: (line: string) => emit("stdout", line),
    stderr: (line: string) => emit("stderr", line),
  });
  // Pyodide keeps a reference to its snapshot; give back the memory (a copy, only ever read)
  (message.snapshot.buffer as ArrayBuffer).transfer(0);
  await rehearse(python);
  // the job's code gets no host read (nor network unless asked): loading Pyodide needed it
  Deno.permissions.revokeSync({ name: "read" });
  if (!message.network) Deno.permissions.revokeSync({ name: "net" });
  post({ kind: "ready" });
}

async function runPython(job: Limits & { code: string; files: Files }): Promise<void> {
  const py = python;
  if (py === null) throw new Error("the Python worker was not booted");
  for (const [name, data] of Object.entries(job.files)) {
    const full = `${WORKSPACE}/${name}`;
    py.FS.mkdirTree(full.slice(0, full.lastIndexOf("/")));
    py.FS.writeFile(full, b64decode(data));
  }
  py.globals.get("_sa_enter")(WORKSPACE);
  reportExits(() => job.files);
  start(job);
  const outcome = JSON.parse(await py.globals.get("_sa_run")(job.code));
  output.active = false;
  const files = py.globals.get("_sa_files")(WORKSPACE, job.maxFileBytes);
  post({ kind: "done", ...outcome, ...(typeof files === "string" ? { files: JSON.parse(files) } : { filesOverLimit: true }) });
}

// ---------------------------------------------------------------- JavaScript / TypeScript

async function runScript(job: Limits & { code: string; language: string; files: Files }): Promise<void> {
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
  const log = (stream: "stdout" | "stderr") => (...args: unknown[]) => emit(stream, args.map(show).join(" "));
  for (const name of ["log", "info", "debug", "trace"] as const) console[name] = log("stdout");
  for (const name of ["error", "warn"] as const) console[name] = log("stderr");

  const mime = job.language === "typescript" ? "application/typescript" : "application/javascript";
  const url = `data:${mime};base64,${b64encode(new TextEncoder().encode(job.code))}`;
  const collect = (): Record<string, unknown> => {
    let size = 0;
    for (const [name, data] of store) size += name.length + data.length;
    if (size > job.maxFileBytes) return { filesOverLimit: true };
    const out: Files = {};
    for (const [name, data] of store) out[name] = b64encode(data);
    return { files: out };
  };
  reportExits(() => job.files);
  start(job);
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
    post({ kind: "done", ok: true, result: result ?? null, ...collect() });
  } catch (err) {
    post({ ...failure(err, {}), ...collect() });
  }
}

// ---------------------------------------------------------------- dispatch

// deno-lint-ignore no-explicit-any
(self as any).onmessage = async (event: MessageEvent) => {
  const message = event.data;
  try {
    if (message.kind === "snapshot") await makeSnapshot();
    else if (message.kind === "boot") await boot(message);
    else if (message.kind === "python") await runPython(message);
    else await runScript(message);
  } catch (err) {
    post(failure(err, message.files ?? {}));
  }
};
