// The sandbox worker process: runs one job at a time for the Python host, which starts it
// under Deno with no run permission, no host write, read access to the Pyodide package only,
// and network access only when the job asked for it. The host enforces wall time and memory
// from outside (it kills this process); this script only executes and reports.
//
// Protocol: the first stdin line is a secret token. Every later stdin line is one job (JSON);
// every reply is one stdout line "SA1 <token> <json>". Anything else on stdout (a stray write
// by the executed code) is taken by the host as output of the running job.
import { loadPyodide, type PyodideInterface } from "npm:pyodide@0.29.3";

type Files = Record<string, string>; // path inside the workspace -> base64 content
interface Job {
  id: string;
  language: "python" | "javascript" | "typescript";
  code: string;
  files: Files;
  network: boolean;
  maxLogChars: number;
}
interface Log { stream: "stdout" | "stderr"; message: string; time: number }

const encoder = new TextEncoder();
const WORKSPACE = "/workspace";
let token = "";

function reply(payload: unknown): void {
  const line = `SA1 ${token} ${JSON.stringify(payload)}\n`;
  const bytes = encoder.encode(line);
  let written = 0;
  while (written < bytes.length) written += Deno.stdout.writeSync(bytes.subarray(written));
}

function b64decode(text: string): Uint8Array {
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

class LogSink {
  logs: Log[] = [];
  chars = 0;
  truncated = false;
  constructor(private max: number) {}
  push(stream: Log["stream"], message: string): void {
    if (this.truncated) return;
    if (this.chars + message.length > this.max) {
      this.logs.push({ stream: "stderr", message: "[output truncated]", time: Date.now() });
      this.truncated = true;
      return;
    }
    this.chars += message.length;
    this.logs.push({ stream, message, time: Date.now() });
  }
}

// ---------------------------------------------------------------- Python (Pyodide)

let pyodide: PyodideInterface | null = null;
let sink = new LogSink(1 << 20);

const PY_SETUP = `
import json, os, sys, traceback
from pyodide.code import eval_code_async

_sa_baseline_modules = set(sys.modules)
_sa_baseline_path = list(sys.path)

def _sa_reset(workspace):
    import shutil
    for name in list(sys.modules):
        if name not in _sa_baseline_modules:
            del sys.modules[name]
    sys.path[:] = [workspace, *_sa_baseline_path]
    os.chdir("/")
    shutil.rmtree(workspace, ignore_errors=True)
    os.makedirs(workspace)
    os.chdir(workspace)

def _sa_snapshot(workspace):
    import base64
    out = {}
    for root, _dirs, names in os.walk(workspace):
        for name in names:
            full = os.path.join(root, name)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, workspace)] = base64.b64encode(fh.read()).decode()
    return json.dumps(out)

async def _sa_run(code):
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        value = await eval_code_async(code, namespace, filename="<run_code>")
    except BaseException as exc:
        if isinstance(exc, SystemExit) and exc.code in (None, 0):
            return json.dumps({"ok": True, "result": None})
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

async function ensurePyodide(): Promise<PyodideInterface> {
  if (pyodide) return pyodide;
  const py = await loadPyodide({
    stdout: (line: string) => sink.push("stdout", line),
    stderr: (line: string) => sink.push("stderr", line),
  });
  py.runPython(PY_SETUP);
  pyodide = py;
  return py;
}

async function runPython(job: Job): Promise<Record<string, unknown>> {
  const py = await ensurePyodide();
  py.globals.get("_sa_reset")(WORKSPACE);
  const names = Object.keys(job.files);
  for (const name of names) {
    const full = `${WORKSPACE}/${name}`;
    py.FS.mkdirTree(full.slice(0, full.lastIndexOf("/")));
    py.FS.writeFile(full, b64decode(job.files[name]));
  }
  const outcome = JSON.parse(await py.globals.get("_sa_run")(job.code));
  const files = JSON.parse(py.globals.get("_sa_snapshot")(WORKSPACE)) as Files;
  return { ...outcome, files };
}

// ---------------------------------------------------------------- JavaScript / TypeScript

function runScript(job: Job): Promise<Record<string, unknown>> {
  const permissions = {
    net: job.network ? "inherit" : false,
    read: false, write: false, env: false, run: false, ffi: false, sys: false, import: false,
  };
  const worker = new Worker(new URL("./script_worker.ts", import.meta.url), {
    type: "module",
    // deno-lint-ignore no-explicit-any
    deno: { permissions } as any,
  });
  return new Promise((resolve) => {
    worker.onmessage = (event: MessageEvent) => {
      const data = event.data as Record<string, unknown>;
      if (data.kind === "log") {
        sink.push(data.stream as Log["stream"], String(data.message));
        return;
      }
      worker.terminate();
      resolve(data);
    };
    worker.onerror = (event: ErrorEvent) => {
      event.preventDefault();
      worker.terminate();
      resolve({ ok: false, name: "Error", message: event.message, stack: "", files: job.files });
    };
    worker.postMessage({ code: job.code, language: job.language, files: job.files });
  });
}

// ---------------------------------------------------------------- main loop

async function handle(job: Job): Promise<void> {
  sink = new LogSink(job.maxLogChars);
  const started = performance.now();
  let outcome: Record<string, unknown>;
  try {
    outcome = job.language === "python" ? await runPython(job) : await runScript(job);
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    outcome = { ok: false, name: e.name, message: e.message, stack: e.stack ?? "", files: job.files };
  }
  reply({ id: job.id, ...outcome, logs: sink.logs, ms: performance.now() - started });
}

async function main(): Promise<void> {
  const reader = Deno.stdin.readable.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let warmed = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut: number;
    while ((cut = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 1);
      if (!token) {
        const hello = JSON.parse(line) as { token: string; warm: boolean };
        token = hello.token;
        if (hello.warm) await ensurePyodide();
        reply({ ready: true });
        warmed = true;
        continue;
      }
      if (warmed && line.trim()) await handle(JSON.parse(line) as Job);
    }
  }
}

await main();
