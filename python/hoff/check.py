# check.py — `python -m hoff --check script.py [ARGS]`: a preflight that reads a training script and the local
# modules it imports (the ast module: nothing is imported or run, no GPU and no torch needed) and reports every
# PyTorch call or setting of hoff's seam table (hoff.seams), with what hoff does about it; also the Markdown table
# of the docs (--table).  Threading: single-threaded; each run keeps its state in its own objects.
"""python -m hoff --check: what hoff will do about a script's PyTorch calls.

usage: python -m hoff --check [--json] [launcher options] script.py [ARGS...]
       python -m hoff --check --table [--json]

Reads script.py and the modules next to it that it imports (and theirs, each
file once, 8 imports deep at most), without importing or running anything,
and prints one line per PyTorch call or setting of hoff's table
(hoff.seams):

    FILE:LINE: PYTORCH_NAME: VERDICT: message

then a summary line.  VERDICT is what ``python -m hoff script.py`` on a GPU
does about it: works, works through hoff, turned off with a warning,
refused, or not supported yet (PyTorch raises its own "does not yet
support", or drops the call); the message says what happens and the way out.
The training libraries a script uses (Lightning, HF transformers,
accelerate, torchtitan) are not read: the arguments the script gives them
that make them call a row for it (``Trainer(benchmark=True)``,
``TrainingArguments(torch_empty_cache_steps=4)``, torchtitan's memory
monitor) are reported at the line of the call, and the options in ARGS that
their argument parsers read (``--torch_empty_cache_steps 4`` for
HfArgumentParser, also from a single JSON file argument) at the parser's
line.  TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK is reported where the
script sets it and, as ``<environment>:0``, when this environment sets it.

The launcher's own options (--sim, --budget ...) may stay on the command
line; they change nothing here.  --json prints a JSON list of the findings
instead (file, line, name, seam, verdict, message, via, condition).
--table prints the table itself, as the docs show it (Markdown; --json: a
JSON object).

Exit status: 0 when it only reports (whatever it found), 2 on a usage error:
no script, a script that cannot be read or is not Python.
"""

import ast
import json
import os
import sys

from . import seams

USAGE = __doc__.split("\n\n", 1)[1].split("\n\n", 1)[0]
MAX_DEPTH = 8      # local imports followed this many levels deep
MAX_FILES = 400    # local modules read at most
FALSE_WORDS = ("", "0", "false", "no", "n", "off", "none")
ENV_FILE = "<environment>"

# The launcher's options, which --check accepts and ignores (so a command line can be checked by adding --check).
_VALUE_OPTS = ("--step-mark", "--budget", "--stats-json")
_FLAG_OPTS = ("--no-install", "--stats", "--sim")

# Names that stand for torch.cuda on a CUDA machine (torchtitan's device_module idiom).
_DEVICE_MODULES = {"torchtitan.tools.utils.device_module": "torch.cuda"}
# Calls that set a setting of the table through a keyword: callee -> (keyword, setting).
_SETTING_CALLS = {
    "torch.backends.cudnn.flags": ("benchmark", "torch.backends.cudnn.benchmark"),
    "torch.backends.cudnn.set_flags": ("_benchmark", "torch.backends.cudnn.benchmark"),
}
_ENV_SETTERS = ("os.environ.setdefault", "os.putenv")


class UsageError(Exception):
    """A command line or a script --check cannot use: the message says why (exit status 2)."""


class Finding:
    """One PyTorch call or setting of the table, where it is, and the row's verdict and message."""

    def __init__(self, file, line, name, seam, via=None, condition=None):
        self.file, self.line, self.name, self.seam = file, line, name, seams.BY_ID[seam]
        self.via, self.condition = via, condition

    @property
    def verdict(self):
        return self.seam.verdict

    def message(self):
        parts = []
        if self.condition:
            parts.append(self.condition)
        if self.via:
            parts.append(self.via)
        parts.append(self.seam.message)
        return ": ".join(parts)

    def text(self):
        return "%s:%d: %s: %s: %s" % (self.file, self.line, self.name, self.verdict, self.message())

    def as_dict(self):
        return {"file": self.file, "line": self.line, "name": self.name, "seam": self.seam.id,
                "verdict": self.verdict, "message": self.message(), "via": self.via, "condition": self.condition}


def _unparse(node):
    try:
        return ast.unparse(node)  # Python 3.9+
    except (AttributeError, ValueError):
        return "the value"


def _literal(node):
    """(True, value) for a literal (constants, and not/- of one), (False, None) for anything else."""
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _holds(when, node, what):
    """Whether the value node meets the condition: (True, None), (False, None), or (True, condition text) when
    the value is known only at run time."""
    known, value = _literal(node)
    if isinstance(when, tuple):
        if known:
            return (value in when), None
        return True, "when %s is %s at run time" % (what, " or ".join('"%s"' % v for v in when))
    if known:
        if isinstance(value, str):
            truthy = value.strip().lower() not in FALSE_WORDS
        else:
            truthy = bool(value)
        return (truthy if when == seams.TRUE else not truthy), None
    return True, "when %s is %s at run time" % (what, "true" if when == seams.TRUE else "false")


def _arg_holds(when, value):
    """The same for an option's text in ARGS; value None is a bare flag (true)."""
    if isinstance(when, tuple):
        return value in when
    truthy = value is None or value.strip().lower() not in FALSE_WORDS
    return truthy if when == seams.TRUE else not truthy


class _Index:
    """The table, keyed the way the scanner looks things up."""

    def __init__(self):
        self.refs, self.settings, self.env, self.methods = {}, {}, {}, {}
        for s in seams.SEAMS:
            for r in s.refs:
                self.refs[r] = s.id
            for r in s.settings:
                self.settings[r] = s.id
            for e in s.env:
                self.env[e] = s.id
            for m in s.methods:
                shown = [n for n in s.names if n.endswith("." + m)]
                self.methods[m] = (s.id, shown[0] if shown else m)
        self.known = set(self.refs) | set(self.settings) | set(seams.COMPILE_NAMES)
        self.roots = {root: lib for lib, roots in seams.LIBRARIES.items() for root in roots}

    def library(self, dotted):
        """The library key of a dotted name imported from one of the libraries, else None."""
        return self.roots.get(dotted.split(".", 1)[0]) if dotted else None


_INDEX = _Index()


class _Run:
    """One --check: the script, the modules it imports, what was found."""

    def __init__(self, script, args, environ):
        self.script, self.args, self.environ = script, list(args), environ
        self.base = os.path.dirname(os.path.abspath(script))
        self.findings = []
        self._keys = set()
        self.files = []         # display names of the files read, the script first
        self.notes = []         # modules that could not be read, ARGS files: said on stderr
        self.libraries = {}     # library key -> (display, line) of its first import
        self.readers = {}       # (library, reader name) -> (display, line) of its first call

    def add(self, finding):
        key = (finding.file, finding.line, finding.name, finding.seam.id, finding.via)
        if key not in self._keys:
            self._keys.add(key)
            self.findings.append(finding)

    def display(self, path):
        if path == os.path.abspath(self.script):
            return self.script
        return os.path.join(os.path.dirname(self.script), os.path.relpath(path, self.base))

    def run(self):
        tree = _parse_script(self.script)
        queue = [(os.path.abspath(self.script), tree, 0)]
        seen = {os.path.realpath(self.script)}
        while queue:
            path, tree, depth = queue.pop(0)
            scan = _FileScan(self, path, self.display(path), tree)
            scan.scan()
            self.files.append(scan.display)
            if depth >= MAX_DEPTH:
                continue
            for mod in scan.local_modules:
                real = os.path.realpath(mod)
                if real in seen:
                    continue
                seen.add(real)
                if len(seen) > MAX_FILES + 1:
                    self.notes.append("more than %d local modules: the rest not read" % MAX_FILES)
                    queue = []
                    break
                try:
                    with open(mod, "rb") as f:
                        mtree = ast.parse(f.read(), filename=mod)
                except (OSError, SyntaxError, ValueError) as e:
                    self.notes.append("%s: not read (%s)" % (self.display(mod), _why(e)))
                    continue
                queue.append((mod, mtree, depth + 1))
        self._args()
        self._environment()
        order = {f: i for i, f in enumerate(self.files)}
        self.findings.sort(key=lambda f: (order.get(f.file, len(order)), f.line))
        return self.findings

    def _args(self):
        args, from_json = self.args, None
        for st in seams.ARGS_SETTINGS:
            where = self.readers.get((st.library, st.reader)) if st.reader else self.libraries.get(st.library)
            if where is None:
                continue
            opts = args
            if st.library == "transformers" and len(args) == 1 and args[0].endswith(".json"):
                if from_json is None:
                    from_json = self._json_args(args[0])
                opts = from_json
            value, present = None, False
            for i, a in enumerate(opts):
                if a == st.flag:
                    present = True
                    value = opts[i + 1] if i + 1 < len(opts) and not opts[i + 1].startswith("--") else None
                elif a.startswith(st.flag + "="):
                    present, value = True, a.split("=", 1)[1]
            if not present or not _arg_holds(st.when, value):
                continue
            given = st.flag if value is None else "%s %s" % (st.flag, value)
            for name in st.calls:
                shown = name.format(value=value) if "{value}" in name else name
                self.add(Finding(where[0], where[1], shown, seams.seam_of(name).id,
                                 via="through %s in ARGS (%s)" % (given, st.how)))

    def _json_args(self, path):
        """HfArgumentParser reads a single .json argument as its options: those, as --key value."""
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            self.notes.append("%s: ARGS file not read (%s)" % (path, _why(e)))
            return []
        if not isinstance(data, dict):
            return []
        out = []
        for k, v in data.items():
            out += ["--" + str(k), ("true" if v else "false") if isinstance(v, bool) else str(v)]
        return out

    def _environment(self):
        for var, sid in _INDEX.env.items():
            val = self.environ.get(var)
            if val is not None and val.strip().lower() not in FALSE_WORDS:
                self.add(Finding(ENV_FILE, 0, var, sid, via="set in this environment (%s=%s)" % (var, val)))


def _why(e):
    if isinstance(e, SyntaxError):
        return "SyntaxError at line %s: %s" % (e.lineno, e.msg)
    return "%s: %s" % (type(e).__name__, e.strerror if isinstance(e, OSError) and e.strerror else e)


def _parse_script(script):
    if os.path.isdir(script):
        raise UsageError("%s: is a directory, not a Python script" % script)
    try:
        with open(script, "rb") as f:
            source = f.read()
    except FileNotFoundError:
        raise UsageError("%s: no such file" % script)
    except OSError as e:
        raise UsageError("%s: cannot be read (%s)" % (script, e.strerror or e))
    try:
        return ast.parse(source, filename=script)
    except SyntaxError as e:
        where = "%s:%s" % (script, e.lineno) + (":%s" % e.offset if e.offset else "")
        text = (e.text or "").rstrip("\n")
        raise UsageError("%s: not Python (SyntaxError: %s)%s; --check reads a Python script"
                         % (where, e.msg, "\n    " + text.strip() if text.strip() else ""))
    except ValueError as e:  # null bytes
        raise UsageError("%s: not Python (%s); --check reads a Python script" % (script, e))


class _FileScan(ast.NodeVisitor):
    """The findings of one file: its imports and aliases first, then one walk over it."""

    def __init__(self, run, path, display, tree):
        self.run, self.path, self.display, self.tree = run, path, display, tree
        self.aliases = {}       # a name in the file -> the dotted name it stands for
        self.star = []          # modules imported with *
        self.libs = set()       # libraries this file imports
        self.local_modules = []
        self._handled = set()   # ids of nodes reported already

    # --- names ---------------------------------------------------------------------------------------------------

    def _bind(self):
        assigns = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        top = a.name.split(".", 1)[0]
                        self.aliases[top] = top
                    self._imported(a.name, node.lineno)
                    self._local(a.name.split("."), self.run.base, ())
            elif isinstance(node, ast.ImportFrom):
                names = [a.name for a in node.names if a.name != "*"]
                if node.level == 0 and node.module:
                    for a in node.names:
                        if a.name == "*":
                            self.star.append(node.module)
                        else:
                            self.aliases[a.asname or a.name] = node.module + "." + a.name
                    self._imported(node.module, node.lineno)
                    self._local(node.module.split("."), self.run.base, names)
                elif node.level > 0 and self.path != os.path.abspath(self.run.script):
                    pkg = os.path.dirname(self.path)
                    for _ in range(node.level - 1):
                        pkg = os.path.dirname(pkg)
                    self._local(node.module.split(".") if node.module else [], pkg, names)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                assigns.append(node)
        for _ in range(3):  # aliases of aliases: cuda = torch.cuda; mem = cuda.memory
            for node in assigns:
                d = self.resolve(node.value)
                if d and (d.split(".", 1)[0] == "torch" or _INDEX.library(d)):
                    self.aliases.setdefault(node.targets[0].id, d)

    def _imported(self, module, line):
        lib = _INDEX.library(module)
        if lib:
            self.libs.add(lib)
            self.run.libraries.setdefault(lib, (self.display, line))

    def _local(self, parts, base, names):
        """The files of a module next to the script (or of a relative import) and of the names imported from it."""
        if parts and (parts[0] == "torch" or parts[0] in _INDEX.roots):
            return
        d = base
        for p in parts:
            d = os.path.join(d, p)
            if os.path.isfile(d + ".py"):
                self.local_modules.append(d + ".py")
                d = None  # a module: what follows are its attributes
                break
            if not os.path.isdir(d):
                return
            init = os.path.join(d, "__init__.py")
            if os.path.isfile(init):
                self.local_modules.append(init)  # else a namespace package
        if d is None:
            return
        for n in names:  # from package import submodule
            f = os.path.join(d, n + ".py")
            if os.path.isfile(f):
                self.local_modules.append(f)
            elif os.path.isfile(os.path.join(d, n, "__init__.py")):
                self.local_modules.append(os.path.join(d, n, "__init__.py"))

    def resolve(self, node):
        """The dotted name an expression stands for (torch.cuda.memory_stats), or None."""
        if isinstance(node, ast.Name):
            d = self.aliases.get(node.id)
            if d is None:
                for m in self.star:
                    if m + "." + node.id in _INDEX.known:
                        return m + "." + node.id
                return None
            return _DEVICE_MODULES.get(d, d)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            if base is None:
                return None
            return _DEVICE_MODULES.get(base + "." + node.attr, base + "." + node.attr)
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == "getattr" and "getattr" not in self.aliases and len(node.args) >= 2:
                if self.resolve(node.args[0]) == "torch":  # device_module = getattr(torch, device_type)
                    known, value = _literal(node.args[1])
                    return "torch.cuda" if not known or value == "cuda" else None
            elif self.resolve(f) == "torch.get_device_module":
                return "torch.cuda"
        return None

    # --- the walk ------------------------------------------------------------------------------------------------

    def scan(self):
        self._bind()
        self.visit(self.tree)

    def _add(self, node, name, seam, via=None, condition=None):
        self.run.add(Finding(self.display, node.lineno, name, seam, via, condition))

    def _library_setting(self, node, st, condition=None):
        via = "through %s %s (%s)" % (seams.LIBRARY_TITLES[st.library], st.text, st.how)
        for name in st.calls:
            shown = name
            if "{value}" in name:  # the mode the script gives the library
                kw = [k.value for k in getattr(node, "keywords", ()) if k.arg == st.keyword]
                known, value = _literal(kw[0]) if kw else (False, None)
                shown = name.format(value=value) if known else name.replace('"{value}"', _unparse(kw[0]) if kw
                                                                            else "...")
            self._add(node, shown, seams.seam_of(name).id, via, condition)

    def _reference(self, node):
        """A Name or Attribute that is used: a row's name, or a library's name that makes a row's call."""
        if id(node) in self._handled:
            return True
        d = self.resolve(node)
        if not d:
            return False
        if d in seams.COMPILE_NAMES:  # @torch.compile, or torch.compile passed on
            self._add(node, d, "compile")
            return True
        if d in _INDEX.refs:
            self._add(node, d, _INDEX.refs[d])
            return True
        lib = _INDEX.library(d)
        if lib:
            last = d.rsplit(".", 1)[-1]
            hit = False
            for st in seams.LIBRARY_SETTINGS:
                if st.library == lib and st.when == seams.ANY and not st.method and st.callee == last:
                    self._library_setting(node, st)
                    hit = True
            return hit
        return False

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load):
            self._reference(node)

    def visit_Attribute(self, node):
        if isinstance(node.ctx, ast.Load) and self._reference(node):
            return
        self.generic_visit(node)

    # annotations are no uses
    def visit_arg(self, node):
        return

    def visit_FunctionDef(self, node):
        for d in node.decorator_list:
            self.visit(d)
        self.visit(node.args)
        for stmt in node.body:
            self.visit(stmt)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node):
        self._assigned(node.target, node.value)
        self.visit(node.target)
        if node.value is not None:
            self.visit(node.value)

    def visit_Assign(self, node):
        for t in node.targets:
            self._assigned(t, node.value)
        self.generic_visit(node)

    def _assigned(self, target, value):
        if value is None:
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts):
                    self._assigned(t, v)
            return
        if isinstance(target, ast.Attribute):
            self._set(target, self.resolve(target), value)
        elif isinstance(target, ast.Subscript) and self.resolve(target.value) == "os.environ":
            key = target.slice
            if type(key).__name__ == "Index":  # Python 3.8
                key = key.value
            known, var = _literal(key)
            if known:
                self._env(target, var, value)

    def _set(self, node, dotted, value):
        if dotted in _INDEX.settings:
            holds, cond = _holds(seams.TRUE, value, "`%s`" % _unparse(value))
            if holds:
                self._add(node, dotted, _INDEX.settings[dotted], condition=cond)

    def _env(self, node, var, value):
        if var in _INDEX.env:
            holds, cond = _holds(seams.TRUE, value, "`%s`" % _unparse(value))
            if holds:
                self._add(node, var, _INDEX.env[var], condition=cond)

    def visit_Call(self, node):
        f = node.func
        d = self.resolve(f)
        kws = {k.arg: k.value for k in node.keywords if k.arg}
        if d in seams.COMPILE_NAMES:
            self._compile(node, d, kws)
            self._handled.add(id(f))
        elif d in _SETTING_CALLS:
            kw, setting = _SETTING_CALLS[d]
            if kw in kws:
                self._set(node, setting, kws[kw])
        elif d in _ENV_SETTERS and len(node.args) >= 2:
            known, var = _literal(node.args[0])
            if known:
                self._env(node, var, node.args[1])
        elif d == "os.environ.update":
            for a in node.args:
                if isinstance(a, ast.Dict):
                    for k, v in zip(a.keys, a.values):
                        known, var = _literal(k) if k is not None else (False, None)
                        if known:
                            self._env(node, var, v)
            for k, v in kws.items():
                self._env(node, k, v)
        elif isinstance(f, ast.Name) and f.id == "setattr" and "setattr" not in self.aliases and len(node.args) == 3:
            obj = self.resolve(node.args[0])
            known, attr = _literal(node.args[1])
            if obj and known and isinstance(attr, str):
                self._set(node, obj + "." + attr, node.args[2])
        lib = _INDEX.library(d)
        if lib:
            last = d.rsplit(".", 1)[-1]
            for st in seams.LIBRARY_SETTINGS:
                if st.library != lib or st.when == seams.ANY or st.method or st.callee != last:
                    continue
                if st.keyword in kws:
                    holds, cond = _holds(st.when, kws[st.keyword], "`%s`" % _unparse(kws[st.keyword]))
                    if holds:
                        self._library_setting(node, st, cond)
            for st in seams.ARGS_SETTINGS:
                if st.library == lib and st.reader == last:
                    self.run.readers.setdefault((lib, last), (self.display, node.lineno))
        if isinstance(f, ast.Attribute) and d is None:
            self._method(node, f, kws)
        self.generic_visit(node)

    def _method(self, node, f, kws):
        """x.name(...) on an object that is no imported module (not hoff.record_stream(t, s), a module's function)."""
        if f.attr in _INDEX.methods:
            sid, shown = _INDEX.methods[f.attr]
            self._add(node, shown, sid)
        elif f.attr == "compile" and not node.args:
            self._compile(node, "torch.nn.Module.compile", kws)
        for st in seams.LIBRARY_SETTINGS:
            if st.method and st.callee == f.attr and st.library in self.libs:
                self._library_setting(node, st)

    def _compile(self, node, name, kws):
        """torch.compile / Module.compile: with CUDA graphs (its mode, backend or options) or without."""
        for kw, values, seam in (("mode", seams.COMPILE_GRAPH_MODES, "compile_cudagraphs"),
                                 ("backend", seams.COMPILE_GRAPH_BACKENDS, "compile_cudagraphs_backend")):
            if kw in kws:
                known, value = _literal(kws[kw])
                if known and value in values:
                    self._add(node, '%s(%s="%s")' % (name, kw, value), seam)
                    return
                if not known and not isinstance(kws[kw], ast.Call) and kw == "mode":
                    self._add(node, "%s(mode=%s)" % (name, _unparse(kws[kw])), "compile_cudagraphs",
                              condition="when `%s` is %s at run time"
                              % (_unparse(kws[kw]), " or ".join('"%s"' % v for v in values)))
                    return
        opts = kws.get("options")
        if isinstance(opts, ast.Dict):
            for k, v in zip(opts.keys, opts.values):
                known, key = _literal(k) if k is not None else (False, None)
                if known and key == seams.COMPILE_GRAPH_OPTION:
                    holds, cond = _holds(seams.TRUE, v, "`%s`" % _unparse(v))
                    if holds:
                        self._add(node, '%s(options={"%s": %s})' % (name, key, _unparse(v)), "compile_cudagraphs",
                                  condition=cond)
                        return
        self._add(node, name, "compile")


def check(script, args=(), environ=None):
    """The findings for script.py run with args (a list of Finding, in file and line order); UsageError when the
    script cannot be read or is not Python.  environ: the environment to report (default os.environ)."""
    r = _Run(script, args, os.environ if environ is None else environ)
    r.run()
    return r


def summary(run):
    counts = {}
    for f in run.findings:
        counts[f.verdict] = counts.get(f.verdict, 0) + 1
    where = run.files[0]
    if len(run.files) > 1:
        where += " and %d local module%s" % (len(run.files) - 1, "" if len(run.files) == 2 else "s")
    if not run.findings:
        line = "hoff --check: nothing from hoff's table in %s" % where
    else:
        line = "hoff --check: %d finding%s (%s) in %s" % (
            len(run.findings), "" if len(run.findings) == 1 else "s",
            ", ".join("%d %s" % (counts[v], v) for v in seams.VERDICTS if v in counts), where)
    libs = sorted(run.libraries)
    if libs:
        line += "; libraries not read (their settings come from hoff's table): %s" % ", ".join(libs)
    return line


# --- the table, for the docs ---------------------------------------------------------------------------------------

def _cell(text):
    return text.replace("|", "\\|")


def _calls(names):
    """The PyTorch names of a library setting, a mode template once per mode with CUDA graphs."""
    out = []
    for n in names:
        out += [n.format(value=v) for v in seams.COMPILE_GRAPH_MODES] if "{value}" in n else [n]
    return ", ".join("`%s`" % n for n in out)


def table_markdown():
    """The docs' table of the seams, made from hoff.seams (python/README.md holds this text as it is)."""
    out = ["| PyTorch | what the script does | under hoff | what happens, and the way out | who does it |",
           "| --- | --- | --- | --- | --- |"]
    for s in seams.SEAMS:
        out.append("| %s | %s | %s | %s | %s |" % (", ".join("`%s`" % n for n in s.names), _cell(s.what),
                                                   s.verdict, _cell(s.message), _cell(s.who)))
    out += ["", "| library setting | the PyTorch calls it makes for the script | how |", "| --- | --- | --- |"]
    groups = []
    for st in seams.LIBRARY_SETTINGS:
        key = (st.library, st.keyword, st.when, st.calls, st.how, st.method)
        for g in groups:
            if g[0] == key:
                g[1].append(st)
                break
        else:
            groups.append((key, [st]))
    for _, sts in groups:
        text = "%s `%s`" % (seams.LIBRARY_TITLES[sts[0].library], sts[0].text)
        if len(sts) > 1:
            text += " (also %s)" % ", ".join("`%s`" % s.callee for s in sts[1:])
        out.append("| %s | %s | %s |" % (_cell(text), _calls(sts[0].calls), _cell(sts[0].how)))
    out += ["", "| option in ARGS | read by | the PyTorch calls it makes for the script |", "| --- | --- | --- |"]
    for st in seams.ARGS_SETTINGS:
        reader = "%s `%s`" % (seams.LIBRARY_TITLES[st.library], st.reader) if st.reader else \
            "%s (the script imports it)" % seams.LIBRARY_TITLES[st.library]
        cond = {seams.TRUE: "", seams.FALSE: " false"}.get(st.when, " " + "/".join(st.when) if isinstance(
            st.when, tuple) else "")
        out.append("| `%s%s` | %s | %s |" % (st.flag, cond, reader, _calls(st.calls)))
    return "\n".join(out) + "\n"


def table_json():
    import dataclasses
    return {"seams": [dataclasses.asdict(s) for s in seams.SEAMS],
            "library_settings": [dataclasses.asdict(s) for s in seams.LIBRARY_SETTINGS],
            "args_settings": [dataclasses.asdict(s) for s in seams.ARGS_SETTINGS]}


# --- the command line ----------------------------------------------------------------------------------------------

def _split(argv):
    """(options, the rest) of a launcher command line: the options before the script, as a list of flags."""
    opts, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a in _VALUE_OPTS:
            opts.append(a)
            i += 2
            continue
        if a == "--":
            opts.append(a)
            i += 1
            break
        if a == "-m" or not a.startswith("-"):
            break
        opts.append(a)
        i += 1
    return opts, argv[i:]


def requested(argv):
    """Whether a launcher command line asks for --check (among the options before the script)."""
    return "--check" in _split(list(argv))[0]


def main(argv, out=None, err=None):
    """python -m hoff --check ...: argv is the launcher's command line (with --check).  Returns the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        return _main(list(argv), out, err)
    except UsageError as e:
        err.write("hoff --check: %s\n" % e)
        return 2


def _main(argv, out, err):
    as_json = table = False
    while argv:
        a = argv[0]
        if a in ("-h", "--help"):
            out.write(__doc__)
            return 0
        if a in ("--check", "--json", "--table") or a in _FLAG_OPTS:
            as_json = as_json or a == "--json"
            table = table or a == "--table"
            argv = argv[1:]
        elif a in _VALUE_OPTS:
            if len(argv) < 2:
                raise UsageError("%s needs a value" % a)
            argv = argv[2:]
        elif a.split("=", 1)[0] in _VALUE_OPTS:
            argv = argv[1:]
        elif a == "-m":
            raise UsageError("--check reads a script file: give its path, not -m MODULE\n" + USAGE)
        elif a == "--":
            argv = argv[1:]
            break
        elif a.startswith("-"):
            raise UsageError("unknown option %r (see 'python -m hoff --check --help')" % a)
        else:
            break
    if table:
        if as_json:
            out.write(json.dumps(table_json(), indent=1) + "\n")
        else:
            out.write(table_markdown())
        return 0
    if not argv:
        raise UsageError("no script to check\n" + USAGE)
    run = check(argv[0], argv[1:])
    for note in run.notes:
        err.write("hoff --check: %s\n" % note)
    if as_json:
        out.write(json.dumps([f.as_dict() for f in run.findings], indent=1) + "\n")
    else:
        for f in run.findings:
            out.write(f.text() + "\n")
        out.write(summary(run) + "\n")
    return 0
