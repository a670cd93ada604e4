#!/usr/bin/env python3
# schema_check.py — validate JSON documents (one per line) against a JSON Schema, for the subset hoff's schemas use:
# type (or a list of types), enum, const, properties, required, additionalProperties (bool or schema), items,
# minimum, maximum, pattern, $ref to "#/$defs/...", oneOf, anyOf.  No dependencies.
# usage: schema_check.py SCHEMA [DEF] < FILE   (DEF: validate against $defs/DEF instead of the root)
import json
import re
import sys

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


class Invalid(Exception):
    pass


def resolve(root, ref):
    if not ref.startswith("#/"):
        raise Invalid("unsupported $ref %r" % ref)
    node = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def check(root, schema, v, path):
    if "$ref" in schema:
        check(root, resolve(root, schema["$ref"]), v, path)
    if "oneOf" in schema:
        ok = 0
        errs = []
        for s in schema["oneOf"]:
            try:
                check(root, s, v, path)
                ok += 1
            except Invalid as e:
                errs.append(str(e))
        if ok != 1:
            raise Invalid("%s: matches %d of oneOf (want 1): %s" % (path, ok, "; ".join(errs)))
    if "anyOf" in schema:
        errs = []
        for s in schema["anyOf"]:
            try:
                check(root, s, v, path)
                break
            except Invalid as e:
                errs.append(str(e))
        else:
            raise Invalid("%s: matches none of anyOf: %s" % (path, "; ".join(errs)))
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(TYPES[t](v) for t in types):
            raise Invalid("%s: %r is not of type %s" % (path, v, "/".join(types)))
    if "const" in schema and v != schema["const"]:
        raise Invalid("%s: %r is not %r" % (path, v, schema["const"]))
    if "enum" in schema and v not in schema["enum"]:
        raise Invalid("%s: %r is not one of %r" % (path, v, schema["enum"]))
    if TYPES["number"](v):
        if "minimum" in schema and v < schema["minimum"]:
            raise Invalid("%s: %r < minimum %r" % (path, v, schema["minimum"]))
        if "maximum" in schema and v > schema["maximum"]:
            raise Invalid("%s: %r > maximum %r" % (path, v, schema["maximum"]))
    if isinstance(v, str) and "pattern" in schema and not re.search(schema["pattern"], v):
        raise Invalid("%s: %r does not match %r" % (path, v, schema["pattern"]))
    if isinstance(v, dict):
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in v:
                raise Invalid("%s: required field %r is missing" % (path, k))
        for k, item in v.items():
            if k in props:
                check(root, props[k], item, path + "." + k)
            else:
                extra = schema.get("additionalProperties", True)
                if extra is False:
                    raise Invalid("%s: field %r is not in the schema" % (path, k))
                if isinstance(extra, dict):
                    check(root, extra, item, path + "." + k)
    if isinstance(v, list) and "items" in schema:
        for i, item in enumerate(v):
            check(root, schema["items"], item, "%s[%d]" % (path, i))


def main():
    if len(sys.argv) not in (2, 3):
        sys.stderr.write("usage: schema_check.py SCHEMA [DEF] < FILE\n")
        return 2
    with open(sys.argv[1]) as f:
        root = json.load(f)
    schema = root["$defs"][sys.argv[2]] if len(sys.argv) == 3 else root
    n = 0
    for lineno, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError as e:
            print("line %d: not JSON: %s" % (lineno, e))
            return 1
        try:
            check(root, schema, doc, "$")
        except Invalid as e:
            print("line %d: %s" % (lineno, e))
            return 1
        n += 1
    if n == 0:
        print("no JSON documents to check")
        return 1
    print("%d document%s valid" % (n, "" if n == 1 else "s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
