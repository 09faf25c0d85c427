"""The test harness that runs inside the sandbox, as source text for `python3 -I -S -c`.

Why it is shaped like this (the channel the solution cannot write):
- The harness gets the tests, the solutions and a fresh random nonce on stdin and reads all of
  it before any solution code runs; the tests are never written into the sandbox's files.
- It marks itself non-dumpable (prctl), so processes of the same uid cannot read its memory or
  its file descriptors through /proc, nor ptrace it. If that fails it refuses to run.
- A solution is imported only in a child process. The child evaluates each test's `call` and
  sends back the value's repr; the harness parses it with `ast.literal_eval` (no solution code
  can run there) and compares it with `expected`, which only the harness evaluates. A child can
  lie about its own value, but it never learns the value that would pass.
- The verdict is one line on the harness's stdout, prefixed by the nonce. Children write to
  their own pipes, never to that stdout, and cannot learn the nonce, so printing "PASSED",
  exiting early or editing files cannot produce a record the host accepts.

Several solutions of one task may be judged in one run (one child each, one after the other);
`roost tasks check` uses that to pay for the sandbox and the harness once per task.
"""

from __future__ import annotations

__all__ = ["CHILD_SOURCE", "HARNESS_SOURCE"]

# No imports beyond builtins and os/sys: every millisecond here is paid per verification.
CHILD_SOURCE = r"""
import os, sys, marshal
reply = os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)
sys.path.insert(0, os.getcwd())
def send(i, kind, text):
    reply.write("%d\t%s\t%s\n" % (i, kind, repr(text)[:1000000]))
    reply.flush()
try:
    # Compiled from source, never from a __pycache__ file that may be stale or planted.
    path = os.path.join(os.getcwd(), sys.argv[1] + ".py")
    with open(path, encoding="utf-8") as src:
        code = compile(src.read(), path, "exec")
    mod = type(sys)(sys.argv[1])
    mod.__file__ = path
    sys.modules[sys.argv[1]] = mod
    exec(code, mod.__dict__)
    cand = getattr(mod, sys.argv[2])
except BaseException as exc:
    send(-1, "error", "%s: %s" % (type(exc).__name__, str(exc)[:300]))
    raise SystemExit(0)
send(-1, "ok", "")
ns = dict(vars(mod))
ns["candidate"] = cand
stdin = sys.stdin.buffer
while True:
    try:
        i, call, check = marshal.load(stdin)
    except EOFError:
        break
    try:
        if check:
            exec(check, ns)
            send(i, "ok", "")
        else:
            send(i, "value", repr(eval(call, ns)))
    except BaseException as exc:
        send(i, "error", "%s: %s" % (type(exc).__name__, str(exc)[:300]))
"""

HARNESS_SOURCE = r"""
import ast, ctypes, json, marshal, math, os, select, subprocess, sys, time
if ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 0
    sys.exit("harness: cannot make itself non-dumpable")
job = json.loads(sys.stdin.buffer.read())
sys.stdin.close()
nonce, tests, limit, module = job["nonce"], job["tests"], float(job["timeout_s"]), job["module"]
path = module + ".py"

def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
        except TypeError:
            return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return a == b

def parse(line):
    parts = line.decode(errors="replace").split("\t", 2)
    try:
        return int(parts[0]), parts[1], ast.literal_eval(parts[2])
    except (IndexError, ValueError, SyntaxError, MemoryError, RecursionError):
        return None, "error", "unreadable reply"

class Child:
    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", "-c", job["child"], module, job["entry"]],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        self.buf = b""
        first = self.read(limit + 5.0)
        self.import_error = None
        if not isinstance(first, tuple):
            self.import_error = "the solution did not load (crashed or timed out)"
        elif first[1] != "ok":
            self.import_error = str(first[2])

    def read(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return "timeout"
            chunk = os.read(fd, 65536)
            if not chunk or len(self.buf) > 2000000:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return parse(line)

    def ask(self, i, test):
        try:
            self.proc.stdin.write(marshal.dumps((i, test.get("call", ""), test.get("check", ""))))
            self.proc.stdin.flush()
        except OSError:
            return None
        return self.read(limit)

    def kill(self):
        self.proc.kill()
        self.proc.wait()

def place(source):
    # Never follow a link the solution may have planted where its file goes.
    if os.path.lexists(path):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    # surrogatepass: an answer holding a lone surrogate is written as it is and then fails to
    # load (the agent's error); strict UTF-8 would crash the harness (an evaluation failure).
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as out:
        out.write(source)

def judge():
    results = []
    child = None
    for i, test in enumerate(tests):
        name = test.get("name") or "test_%d" % i
        if child is None:
            try:
                child = Child()
            except (OSError, MemoryError) as exc:
                # The solution used up the sandbox's processes or memory: its failure, and
                # the harness must still give a verdict rather than a traceback.
                detail = "the sandbox's limits stopped the solution: %s" % exc
                results.extend({"name": t.get("name") or "test_%d" % j, "status": "crash",
                                "detail": detail} for j, t in enumerate(tests) if j >= i)
                break
        if child.import_error is not None:
            results.append({"name": name, "status": "error", "detail": child.import_error})
            continue
        reply = child.ask(i, test)
        if not isinstance(reply, tuple):
            timeout = reply == "timeout"
            detail = "over %ss" % limit if timeout else "the solution's process died"
            results.append({"name": name, "status": "timeout" if timeout else "crash",
                            "detail": detail})
            child.kill()
            child = None
            continue
        rid, kind, payload = reply
        if rid != i:
            results.append({"name": name, "status": "error", "detail": "reply out of order"})
        elif kind == "error":
            results.append({"name": name, "status": "error", "detail": str(payload)[:300]})
        elif test.get("check"):
            results.append({"name": name, "status": "passed" if kind == "ok" else "failed"})
        else:
            expected = eval(test["expected"], {})
            try:
                got = ast.literal_eval(payload) if kind == "value" else None
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                results.append({"name": name, "status": "failed", "detail": "not a plain value"})
                continue
            if kind == "value" and same(got, expected):
                results.append({"name": name, "status": "passed"})
            else:
                detail = "%s = %s" % (test["call"], str(payload)[:100])
                results.append({"name": name, "status": "failed", "detail": detail})
    if child is not None:
        child.kill()
    return results

verdicts = []
for source in job["solutions"]:
    place(source)
    verdicts.append({"tests": judge()})
sys.stdout.write(nonce + " " + json.dumps({"solutions": verdicts}) + "\n")
sys.stdout.flush()
"""
